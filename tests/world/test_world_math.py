"""Arithmetic problems: every worked step is correct and levels span the difficulty range."""

import re

from arcforge.world.mathgen import make_problem


def test_worked_steps_are_correct(world):
    tasks = world.tasks("reasoning", "train") + world.tasks("reasoning", "test")
    for t in tasks:
        steps = t.metadata["steps"]
        assert 1 <= len(steps) <= 3
        prev = None
        for s in steps:
            a, op, b, c = re.fullmatch(r"(\d+) ([-+*]) (\d+) = (\d+)", s).groups()
            a, b, c = int(a), int(b), int(c)
            assert c == {"+": a + b, "-": a - b, "*": a * b}[op]
            assert prev is None or a == prev  # each step continues from the last result
            prev = c
        assert t.validation.answer == str(prev)
        assert 0.0 <= t.difficulty <= 1.0


def test_levels_cover_easy_and_hard(world):
    diffs = {t.difficulty for t in world.tasks("reasoning", "train")}
    assert 0.0 in diffs and 1.0 in diffs


def test_hard_problem_shape():
    import random

    p = make_problem(random.Random(0), "Ana", 3, 3)
    assert len(p.steps) == 3 and p.difficulty == 1.0
    assert p.worked_text().endswith(f"Answer: {p.answer}")
