"""ToolEnv on the world's tools: real lookups, call validity bookkeeping, exact-match reward."""

import pytest

from arcforge.envs.tool_env import ToolEnv
from arcforge.types import Message, ToolCall


def _call(name, **args):
    return Message("assistant", "", tool_calls=[ToolCall(name, args, "c0")])


def test_oracle_calls_reach_the_answer(world):
    env = ToolEnv(world.tools())
    for task in world.tasks("tool")[:6]:
        msgs = env.reset(task)
        assert msgs[-1].content == task.instruction
        assert [t.name for t in env.tools] == task.tools
        results = []
        for c in task.metadata["calls"]:
            step = env.step(_call(c["name"], **c["arguments"]))
            assert not step.done and len(step.observations) == 1
            results.append(step.observations[0].content)
        assert results[-1] == task.validation.answer  # the last oracle call yields the answer
        final = env.step(Message("assistant", f"Answer: {task.validation.answer}"))
        assert final.done
        reward = env.verify()
        assert reward.score == 1.0
        n = len(task.metadata["calls"])
        assert reward.details["n_tool_calls"] == n and reward.details["calls_valid"] == [True] * n


def test_invalid_calls_are_observations_and_recorded(world):
    env = ToolEnv(world.tools())
    task = world.tasks("tool")[0]
    env.reset(task)
    obs = env.step(_call("lookup", entity=5, relation="born_in")).observations
    assert obs[0].content.startswith("error:") and "entity" in obs[0].content
    obs = env.step(_call("teleport", to="moon")).observations
    assert obs[0].content.startswith("error: unknown tool")
    obs = env.step(_call("lookup", entity="Nobody Atall", relation="born_in")).observations
    assert obs[0].content.startswith("error: unknown entity")  # valid call, tool said no
    env.step(Message("assistant", "Answer: something else"))
    d = env.verify().details
    assert d["n_tool_calls"] == 3
    assert d["calls_valid"] == [False, False, True]
    assert d["n_errors"] == 3
    assert env.verify().score == 0.0


def test_reply_without_answer_line_uses_whole_content(world):
    env = ToolEnv(world.tools())
    task = world.tasks("tool")[1]
    env.reset(task)
    env.step(Message("assistant", f"  {task.validation.answer}. "))
    assert env.verify().score == 1.0  # normalized exact match


def test_tasks_asking_for_missing_tools_fail_clearly(world):
    task = world.tasks("tool")[0]
    env = ToolEnv({"calculator": world.tools()["calculator"]})
    with pytest.raises(ValueError, match="lookup"):
        env.reset(task)


def _two_hop(world):
    return next(t for t in world.tasks("tool") if len(t.metadata["calls"]) == 2)


def test_call_credit_scores_the_reference_calls_a_wrong_answer_made(world):
    """call_credit c: a wrong answer scores c x the share of the task's reference calls made
    (same tool and arguments up to case and whitespace); a right answer scores 1; the details
    carry the exact-match score and the counts either way; the default scores exact match."""
    task = _two_hop(world)
    first, second = task.metadata["calls"]
    shouty = {k: f"  {str(v).upper()} " for k, v in first["arguments"].items()}

    def episode(env, calls, answer):
        env.reset(task)
        for name, args in calls:
            env.step(_call(name, **args))
        env.step(Message("assistant", f"Answer: {answer}"))
        return env.verify()

    credit = ToolEnv(world.tools(), call_credit=0.4)
    r = episode(credit, [("lookup", shouty)], "no idea")
    assert r.score == pytest.approx(0.2)  # one of two reference calls
    assert (
        r.details["solved"],
        r.details["reference_calls"],
        r.details["reference_calls_made"],
    ) == (0.0, 2, 1)
    r = episode(credit, [("lookup", shouty), (second["name"], second["arguments"])], "no idea")
    assert r.score == pytest.approx(0.4)  # both calls, still a wrong answer: below 1
    miscopied = {**first["arguments"], "entity": "X" + first["arguments"]["entity"]}
    assert episode(credit, [("lookup", miscopied)], "no idea").score == 0.0
    assert episode(credit, [], task.validation.answer).score == 1.0  # right, without calls
    plain = episode(ToolEnv(world.tools()), [("lookup", shouty)], "no idea")
    assert plain.score == 0.0 and plain.details["reference_calls_made"] == 1
    for bad in (1.0, -0.1):
        with pytest.raises(ValueError, match="call_credit must be in \\[0, 1\\)"):
            ToolEnv(world.tools(), call_credit=bad)
