"""Preference pairs from the world's chat tasks: labels true by construction, splits disjoint,
and the `world:preferences` / jsonl preference sources."""

import json
from collections import Counter

import pytest

from arcforge.data.sources import DataError, load_records
from arcforge.errors import ConfigError
from arcforge.rewards.rules import rule_reward
from arcforge.stages.world_source import world_records
from arcforge.world.tasks.constrained_chat import check_constraints
from arcforge.world.text.preferences import preference_pairs


def test_pairs_prefer_the_solution_and_are_deterministic(world):
    tasks = world.tasks("chat")
    pairs = preference_pairs(tasks, world.config.seed, per_task=2)
    by_id = {t.id: t for t in tasks}
    assert len(pairs) >= len(tasks)  # at least one pair per task
    for p in pairs:
        t = by_id[p.task_id]
        assert p.chosen == t.metadata["solution"] and p.prompt == t.instruction
        assert check_constraints(p.chosen, t.validation.constraints)[0] == 1.0
        assert p.rejected.strip() and p.rejected != p.chosen
        # every rejected reply is worse under the rules (a violated constraint or a gate)
        assert rule_reward(p.rejected, t).score < 1.0, (p.reason, p.rejected)
    reasons = Counter(p.reason.split()[0] for p in pairs)
    assert {"violates", "verbose", "off_topic"} <= set(reasons)
    again = preference_pairs(tasks, world.config.seed, per_task=2)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in pairs]


def test_train_and_test_pairs_share_no_prompt(world):
    tr = preference_pairs(world.tasks("chat"), world.config.seed)
    te = preference_pairs(world.tasks("chat", "test"), world.config.seed)
    assert te and not {p.prompt for p in tr} & {p.prompt for p in te}
    assert {p.split for p in te} == {"test"}


def test_world_preferences_source(world):
    recs = world_records(world, "preferences", "test")
    assert recs and all(r.prompt and r.meta["chosen"] and r.meta["rejected"] for r in recs)
    assert recs[0].origin.startswith("world:preferences#pref-test-")


def test_jsonl_preference_records(tmp_path):
    f = tmp_path / "prefs.jsonl"
    rows = [
        {"prompt": "p", "chosen": "good", "rejected": "bad", "note": 1},
        {"prompt": "q", "chosen": "good"},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    recs = load_records(f"jsonl:{f}")  # the bad line is skipped (and logged)
    assert len(recs) == 1 and recs[0].meta["rejected"] == "bad" and recs[0].meta["note"] == 1
    with pytest.raises(DataError, match=r"prefs.jsonl:2: bad record: .*missing 'rejected'"):
        load_records(f"jsonl:{f}", on_error="fatal")


def test_world_tir_source_is_the_reasoning_problems_as_tir_tasks(world):
    from arcforge.envs.registry import env_factory
    from arcforge.types import Message

    recs = world_records(world, "tir", "test")
    probs = world.tasks("reasoning", "test")
    assert [r.task.id for r in recs] == [t.id for t in probs]
    assert {r.task.kind for r in recs} == {"tir"}
    # the TIR environment grades them: the right answer gets 1, a wrong one 0
    task = recs[0].task
    env = env_factory(world)(task)
    try:
        for reply, want in ((task.validation.answer, 1.0), (task.validation.answer + "1", 0.0)):
            env.reset(task)
            env.step(Message("assistant", f"Answer: {reply}"))
            assert env.verify().score == want
    finally:
        env.close()
    with pytest.raises(ConfigError, match="world:tirr:test: unknown suite"):
        world_records(world, "tirr", "test")
