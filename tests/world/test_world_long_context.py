"""Long-context items: the answer's fact is in the text, facts sit far apart, sizes follow."""

import re


def test_needles_and_dialogues(world):
    items = world.long_context(6, 3000, "train", seed=0)
    assert {i.kind for i in items} == {"needle", "dialogue"}
    for item in items:
        assert 2500 <= item.chars <= 6000
        assert item.answer in item.text
        if item.kind == "needle":
            positions = [
                m.start()
                for m in re.finditer(r"(access code|locker number|vault|meets in room)", item.text)
            ]
            assert len(positions) >= 2
            assert min(b - a for a, b in zip(positions, positions[1:])) > 300
        else:
            assert item.text.index(item.answer) < 200  # recalled from the first turn


def test_splits_and_seeds_differ(world):
    a = world.long_context(3, 1500, "train", seed=0)
    assert a == world.long_context(3, 1500, "train", seed=0)
    assert a != world.long_context(3, 1500, "train", seed=1)
    assert a != world.long_context(3, 1500, "test", seed=0)


def test_long_context_tasks(world):
    for t in world.tasks("long_context", "test"):
        assert t.kind == "lm" and t.validation.answer in t.instruction
        assert t.metadata["chars"] > 500
