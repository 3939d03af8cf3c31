"""MathEnv: one question, one reply, a 0/1 verifiable reward (RLVR).

reset(task) gives the problem as a user message (optionally after a system prompt); the first
assistant message ends the episode whatever it holds (a reply that also wrote tool calls is
still the answer: there are no tools here). verify() grades the reply's content with
`math_reward` (last "Answer: ..." line, else the last \\boxed{}, else the whole content;
math-verify equality). The reasoning block is never graded: only what the model answered.
"""

from __future__ import annotations

from arcforge.envs.base import Env
from arcforge.rewards.math import extract_answer, math_reward
from arcforge.types import Reward, Task


class MathEnv(Env):
    """Single-turn math environment.

    Args:
        system_prompt: an optional system message put before the problem.
    """

    single_turn = True

    def check(self, task: Task) -> None:
        if task.validation.answer is None:
            raise ValueError(f"task {task.id}: MathEnv needs validation.answer")

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("MathEnv.verify called before reset")
        reply, reference = self.reply, str(self.task.validation.answer)
        if reply is None:  # the episode ended without a reply (length / context)
            return Reward(0.0, {"answer": None, "reference": reference})
        return Reward(
            math_reward(reply, reference), {"answer": extract_answer(reply), "reference": reference}
        )
