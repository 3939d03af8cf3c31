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
