"""Rule-based rewards: each gate on inputs that pass and fail it, and the gated constraint score."""

import pytest

from arcforge.rewards.rules import GATES, rule_reward
from arcforge.types import Task, Validation


def task(constraints, **meta) -> Task:
    return Task(
        "t", "chat", "say it", validation=Validation(constraints=constraints), metadata=meta
    )


SENTENCE = task(
    [{"type": "include", "word": "Ann"}, {"type": "max_words", "n": 3}, {"type": "no_commas"}]
)


def test_score_is_the_constraint_fraction_when_every_gate_passes():
    # include Ann: yes; max_words 3: "Ann is here ok" has 4 words -> no; no_commas: has "," -> no
    r = rule_reward("Ann is here, ok", SENTENCE)
    assert r.details["gate_failed"] == []
    assert r.score == pytest.approx(1 / 3)
    assert rule_reward("Ann is here", SENTENCE).score == 1.0


@pytest.mark.parametrize(
    "text, errors, calls, gate",
    [
        ("", (), 0, "format"),  # empty
        ("Ann here", ("unclosed <think>",), 0, "format"),  # the parser found a problem
        ("Ann here", (), 1, "format"),  # a tool call in a plain-text reply
        ("Ann <|end|> here", (), 0, "format"),  # stray special token
        ("Bob is here", (), 0, "required"),  # the required word is missing
    ],
)
def test_gates_zero_the_reward(text, errors, calls, gate):
    r = rule_reward(text, SENTENCE, parse_errors=errors, n_tool_calls=calls)
    assert r.score == 0.0
    assert gate in r.details["gate_failed"]
    assert r.details["gates"][gate]  # the reason is a non-empty message


def test_forbidden_words_and_boilerplate():
    t = task([{"type": "exclude", "word": "very"}])
    assert rule_reward("a calm day", t).score == 1.0
    assert rule_reward("a very calm day", t).details["gate_failed"] == ["forbidden"]
    r = rule_reward("A calm day. I hope this helps!", t)
    assert r.score == 0.0 and "boilerplate" in r.details["gates"]["forbidden"]


def test_json_gate_and_exact_keys():
    t = task([{"type": "json_keys", "keys": ["name", "year"]}])
    assert rule_reward('{"name": "Ada", "year": 1843}', t).score == 1.0
    bad = rule_reward('{"name": "Ada", "year": 1843', t)
    assert bad.score == 0.0 and bad.details["gate_failed"] == ["json"]
    # valid JSON with the wrong keys passes the gate but misses the constraint
    wrong = rule_reward('{"name": "Ada"}', t)
    assert wrong.details["gate_failed"] == [] and wrong.score == 0.0
    # metadata format=json asks for JSON without a keys constraint
    assert rule_reward("not json", task([], format="json")).details["gate_failed"] == ["json"]


def test_gates_can_be_chosen_and_unknown_ones_are_errors():
    r = rule_reward("Bob is here", SENTENCE, gates=("format",))
    assert r.details["gate_failed"] == [] and r.score == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="unknown rule gate"):
        rule_reward("x", SENTENCE, gates=("format", "vibes"))
    assert set(GATES) == {"format", "required", "forbidden", "json"}


def test_world_solutions_pass_every_rule(world_small):
    for t in world_small.tasks("chat", "test"):
        assert rule_reward(t.metadata["solution"], t).score == 1.0, t.instruction


@pytest.fixture(scope="module")
def world_small():
    from arcforge.world import WorldConfig, build_world

    return build_world(WorldConfig(seed=3, scale=0.1))
