"""TIREnv end to end in bwrap: scripted tool calls, final answers, timeouts, garbage policies."""

from __future__ import annotations

import pytest

from arcforge.envs.tir_env import TIREnv
from arcforge.sandbox import Limits
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message, Task, ToolCall, Validation

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def _task(answer: str = "5050") -> Task:
    return Task(
        "tir-1",
        "tir",
        "What is the sum of the integers from 1 to 100?",
        validation=Validation(answer=answer),
    )


def _call(code: str, cid: str = "c0") -> Message:
    return Message("assistant", "", tool_calls=[ToolCall("python", {"code": code}, cid)])


def test_scripted_episode_uses_the_sandboxed_python():
    env = TIREnv(tool_timeout=2)
    try:
        msgs = env.reset(_task())
        assert msgs[0].role == "user" and [t.name for t in env.tools] == ["python"]
        obs = env.step(_call("print(sum(range(1, 101)))")).observations
        assert obs[0].content == "5050\n" and obs[0].tool_call_id == "c0"
        err = env.step(_call("import sys; print('x', file=sys.stderr); sys.exit(3)")).observations
        assert err[0].content == "x\n\n[exit code 3]"
        # the interpreter is sandboxed: no network, host home invisible
        net = env.step(_call("import socket; socket.create_connection(('1.1.1.1', 80), 1)"))
        assert "exit code 1" in net.observations[0].content
        slow = env.step(_call("while True: pass")).observations[0].content
        assert "timed out" in slow
        res = env.step(Message("assistant", "The sum is 5050.\nAnswer: 5050"))
        assert res.done and env.verify().score == 1.0
    finally:
        env.close()


def test_wrong_answer_and_bad_calls_score_zero():
    env = TIREnv(limits=Limits(wall_time=5))
    try:
        env.reset(_task())
        bad = Message(
            "assistant",
            "",
            tool_calls=[
                ToolCall("python", {"code": 3}, "a"),
                ToolCall("shell", {"cmd": "ls"}, "b"),
            ],
        )
        obs = env.step(bad).observations
        assert all(o.content.startswith("error:") for o in obs)
        env.step(Message("assistant", "Answer: 5000"))
        reward = env.verify()
        assert reward.score == 0.0 and reward.details["answer"] == "5000"
    finally:
        env.close()


def test_garbage_policy_never_crashes():
    env = TIREnv()
    garbage = ["", "}{<tool_call>", "Answer:", "\x00\x01 lorem", "```python\nprint(1)\n```"]
    try:
        for i in range(50):
            env.reset(_task())
            assert env.step(Message("assistant", garbage[i % len(garbage)])).done
            assert env.verify().score == 0.0
    finally:
        env.close()
