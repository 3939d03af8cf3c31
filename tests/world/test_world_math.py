"""Arithmetic problems: every worked step is correct and levels span the difficulty range."""

import re

from arcforge.world.tasks.mathgen import make_problem


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


def test_column_work_is_correct_and_assembles_the_result():
    import random

    from arcforge.world.tasks.mathgen import column_work

    rng = random.Random(1)
    for _ in range(300):
        a, b = rng.randint(1, 9999), rng.randint(1, 999)
        op = rng.choice("+-*")
        if op == "-":
            a, b = max(a, b), min(a, b)
        if op == "*":
            b = rng.randint(2, 9)
        c = {"+": a + b, "-": a - b, "*": a * b}[op]
        text = column_work(f"{a} {op} {b} = {c}")
        assert text.endswith(f"{a} {op} {b} = {c}")
        if a < 10 and b < 10:
            continue
        head, _, work = text.split(", so ")[0].partition(": ")
        assert head == f"{a} {op} {b}"  # the operation restated before its columns
        cols = work.split(", ")
        digits = []
        for col in cols:  # every column equation is true arithmetic
            lhs, rhs = col.split(" = ")
            assert eval(lhs) == int(rhs)  # noqa: S307 - our own generated digits
            digits.append(int(rhs))
        # units first: each column leaves its last digit, the top column (add/mul) its whole value
        if op == "-":
            assembled = int("".join(str(d) for d in reversed(digits)))
        else:
            assembled = int(str(digits[-1]) + "".join(str(d % 10) for d in reversed(digits[:-1])))
        assert assembled == c, text
