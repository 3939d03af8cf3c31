"""MathEnv: one user message, one reply ends the episode, 0/1 reward on the reply's answer."""

import pytest

from arcforge.envs.base import Environment
from arcforge.envs.math_env import MathEnv
from arcforge.types import Message, Task, ToolCall, Validation

TASK = Task("m-1", "math", "What is 17 * 2?", validation=Validation(answer="34"))


def _play(reply: Message, env: MathEnv | None = None):
    env = env or MathEnv()
    env.reset(TASK)
    result = env.step(reply)
    return env, result, env.verify()


def test_reset_gives_the_problem_and_no_tools():
    env = MathEnv(system_prompt="Be brief.")
    assert isinstance(env, Environment)
    msgs = env.reset(TASK)
    assert [(m.role, m.content) for m in msgs] == [
        ("system", "Be brief."),
        ("user", TASK.instruction),
    ]
    assert env.tools == []


@pytest.mark.parametrize(
    "content, score, answer",
    [
        ("Answer: 34", 1.0, "34"),
        ("17 * 2 = 34.\nAnswer: 34.", 1.0, "34"),
        ("so \\boxed{34}", 1.0, "34"),
        ("Answer: 34.0", 1.0, "34.0"),  # math-verify: 34.0 == 34
        ("Answer: 35", 0.0, "35"),
        ("", 0.0, ""),
    ],
)
def test_reply_is_graded_on_its_content(content, score, answer):
    _, result, reward = _play(Message("assistant", content))
    assert result.done and result.observations == []
    assert reward.score == score
    assert reward.details["answer"] == answer


def test_reasoning_is_not_graded():
    # The right number only inside the think block: the reply itself answers 35.
    _, _, reward = _play(Message("assistant", "Answer: 35", reasoning="Answer: 34"))
    assert reward.score == 0.0


def test_a_reply_with_tool_calls_is_still_the_answer():
    msg = Message("assistant", "Answer: 34", tool_calls=[ToolCall("calculator", {"x": 1})])
    _, result, reward = _play(msg)
    assert result.done and reward.score == 1.0


def test_no_reply_scores_zero_and_reset_clears_the_last_reply():
    env, _, reward = _play(Message("assistant", "Answer: 34"))
    assert reward.score == 1.0
    env.reset(TASK)  # a new episode: the previous reply must not count
    assert env.verify().score == 0.0 and env.verify().details["answer"] is None


def test_task_without_answer_is_rejected():
    with pytest.raises(ValueError, match="validation.answer"):
        MathEnv().reset(Task("m-2", "math", "?"))
