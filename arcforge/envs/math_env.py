"""MathEnv: one question, one reply, a 0/1 verifiable reward (RLVR).

reset(task) gives the problem as a user message (optionally after a system prompt); the first
assistant message ends the episode whatever it holds (a reply that also wrote tool calls is
still the answer: there are no tools here). verify() grades the reply's content with
`math_reward` (last "Answer: ..." line, else the last \\boxed{}, else the whole content;
math-verify equality). The reasoning block is never graded: only what the model answered.
"""

from __future__ import annotations

from arcforge.envs.base import StepResult
from arcforge.rewards.math import extract_answer, math_reward
from arcforge.types import Message, Reward, Task, Tool


class MathEnv:
    """Single-turn math environment.

    Args:
        system_prompt: an optional system message put before the problem.
    """

    def __init__(self, system_prompt: str | None = None) -> None:
        self.system_prompt = system_prompt
        self.tools: list[Tool] = []
        self._task: Task | None = None
        self._reply: str | None = None

    def reset(self, task: Task) -> list[Message]:
        if task.validation.answer is None:
            raise ValueError(f"task {task.id}: MathEnv needs validation.answer")
        self._task, self._reply = task, None
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        self._reply = message.content
        return StepResult(observations=[], done=True)

    def verify(self) -> Reward:
        if self._task is None:
            raise RuntimeError("MathEnv.verify called before reset")
        reference = str(self._task.validation.answer)
        if self._reply is None:  # the episode ended without a reply (length / context)
            return Reward(0.0, {"answer": None, "reference": reference})
        score = math_reward(self._reply, reference)
        return Reward(score, {"answer": extract_answer(self._reply), "reference": reference})

    def close(self) -> None:
        pass
