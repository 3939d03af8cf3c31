"""Constraint checker: accepts the scripted solver's answers, rejects each kind of violation."""

import pytest

from arcforge.world import check_constraints


def test_solver_satisfies_every_chat_task(world):
    tasks = world.tasks("chat", "train") + world.tasks("chat", "test")
    types = set()
    for t in tasks:
        score, details = check_constraints(t.metadata["solution"], t.validation.constraints)
        assert score == 1.0, (t.instruction, t.metadata["solution"], details)
        types.update(c["type"] for c in t.validation.constraints)
    assert {"include", "json_keys"} <= types and len(types) >= 5


@pytest.mark.parametrize(
    ("text", "constraint"),
    [
        ("Hello there.", {"type": "lowercase"}),
        ("hello there.", {"type": "uppercase"}),
        ("no name here", {"type": "include", "word": "Vornhal"}),
        ("this is very good", {"type": "exclude", "word": "very"}),
        ("one two three four", {"type": "max_words", "n": 3}),
        ("one two", {"type": "min_words", "n": 3}),
        ("a, b", {"type": "no_commas"}),
        ('{"name": "x"}', {"type": "json_keys", "keys": ["name", "year"]}),
        ("not json", {"type": "json_keys", "keys": ["name"]}),
        ("ends here", {"type": "starts_with", "phrase": "Note"}),
        ("Note: ends here", {"type": "ends_with", "phrase": "done."}),
    ],
)
def test_violations_are_rejected(text, constraint):
    score, details = check_constraints(text, [constraint])
    assert score == 0.0 and details == {f"0:{constraint['type']}": False}


def test_partial_score_and_unknown_type():
    score, _ = check_constraints("hello, world", [{"type": "lowercase"}, {"type": "no_commas"}])
    assert score == 0.5
    with pytest.raises(ValueError, match="unknown constraint type 'shout'"):
        check_constraints("x", [{"type": "shout"}])
