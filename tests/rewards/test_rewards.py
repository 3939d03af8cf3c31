"""Verifiable rewards: code by hidden unit tests in the sandbox, reasoning_gym's own scorer, and
the registry's routing by task kind / metadata scorer."""

from __future__ import annotations

import pytest

from arcforge.rewards import registry
from arcforge.rewards.code import code_reward, extract_code
from arcforge.rewards.registry import register_reward, reward_fn_for, score
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Reward, Task, Validation

TESTS = (
    "from solution import add\n\n\n"
    "def test_small():\n    assert add(1, 2) == 3\n\n\n"
    "def test_neg():\n    assert add(-1, -2) == -3\n"
)
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def test_extract_code_prefers_the_last_python_block():
    reply = "First:\n```\nx = 1\n```\nthen\n```python\ndef f():\n    return 2\n```\nDone."
    assert extract_code(reply) == "def f():\n    return 2\n"
    assert extract_code("```\ny = 3\n```") == "y = 3\n"
    assert extract_code("def g(): pass") == "def g(): pass\n"


@needs_bwrap
def test_code_reward_passes_right_and_fails_wrong_slow_and_hostile_solutions():
    good = code_reward("```python\ndef add(a, b):\n    return a + b\n```", TESTS)
    assert good.score == 1.0 and good.details["passed"] == 2 == good.details["expected"]
    wrong = code_reward("```python\ndef add(a, b):\n    return a - b\n```", TESTS)
    assert wrong.score == 0.0 and wrong.details["failures"] >= 1
    slow = code_reward(
        "```python\nimport time\ntime.sleep(30)\ndef add(a, b):\n    return a + b\n```",
        TESTS,
        time_limit=2,
    )
    assert slow.score == 0.0 and slow.details["timed_out"]
    # exiting 0 during import must not count as passing: no report, no tests collected
    quitter = code_reward("```python\nimport os\nos._exit(0)\n```", TESTS)
    assert quitter.score == 0.0 and quitter.details["passed"] == 0


def test_registry_routes_math_by_kind_and_rejects_unknown():
    t = Task("m1", "math", "1/2 + 1/4?", validation=Validation(answer="3/4"))
    assert score("so Answer: 0.75", t).score == 1.0
    assert score("Answer: 1/3", t).score == 0.0
    with pytest.raises(ValueError, match="no reward function"):
        reward_fn_for(Task("x", "lm", "?"))


@needs_bwrap
def test_registry_runs_code_tasks_hidden_tests():
    t = Task("c1", "code", "write add", validation=Validation(tests=TESTS))
    assert score("```python\ndef add(a, b):\n    return b + a\n```", t).score == 1.0


def test_reasoning_gym_source_is_scored_by_its_own_scorer():
    pytest.importorskip("reasoning_gym")
    from arcforge.data.reasoning_gym import load_reasoning_gym

    recs = load_reasoning_gym("reasoning_gym:basic_arithmetic:test", size=5)
    again = load_reasoning_gym("reasoning_gym:basic_arithmetic:test", size=5)
    assert [r.prompt for r in recs] == [r.prompt for r in again]  # seeded, reproducible
    r = recs[0]
    assert r.task.metadata["scorer"] == "reasoning_gym" and "Answer:" in r.prompt
    assert score(f"<reasoning>\nAnswer: {r.answer}", r.task).score == 1.0
    assert score("Answer: not a number", r.task).score == 0.0
    with pytest.raises(Exception, match="unknown reasoning_gym dataset"):
        load_reasoning_gym("reasoning_gym:no_such_dataset")


@needs_bwrap
def test_code_reward_completes_a_stub_task_with_a_body_only_reply():
    import random

    from arcforge.world.code.codelib import code_space
    from arcforge.world.tasks.pools import code_task

    tpl = next(t for t in code_space(0).train if t.returns == "list")
    task = code_task(random.Random(0), tpl, tpl.names[0])
    score = reward_fn_for(task)
    assert score(f"```python\n{task.metadata['body']}```", task).score == 1.0
    assert score(f"```python\n{task.metadata['solution']}```", task).score == 1.0
    assert score("```python\n    return None\n```", task).score == 0.0


def test_a_registered_reward_scores_its_kind_and_its_scorer_name(monkeypatch):
    monkeypatch.setattr(registry, "REWARDS", dict(registry.REWARDS))  # left as it was
    task = Task("s-1", "sql", "count rows", validation=Validation(answer="3"))
    with pytest.raises(ValueError, match="no reward function .*'sql'"):
        score("3", task)
    register_reward("sql", lambda reply, task: Reward(float(reply == task.validation.answer)))
    assert score("3", task).score == 1.0 and score("4", task).score == 0.0
    routed = Task("m-1", "math", "1+2?", metadata={"scorer": "sql"}, validation=task.validation)
    assert reward_fn_for(routed)("3", routed).score == 1.0  # metadata scorer before kind
