"""TIREnv: tool-integrated reasoning: a math problem plus a `python` tool run in the sandbox.

The agent may call `python(code)` any number of times (each call is a fresh interpreter in the
sandbox, with the tool's time limit; stdout, stderr and a non-zero exit status come back as the
observation). An assistant message without tool calls is the final answer, graded by
`math_reward` against validation.answer (the `Answer: ...` line or the last \\boxed{}).
Simplification: no state is kept between python calls (files in /workspace persist; variables
do not), which keeps every call reproducible and bounded.
"""

from __future__ import annotations

from arcforge.envs.base import Env
from arcforge.envs.terminal_env import python_tool
from arcforge.rewards.math import extract_answer, math_reward
from arcforge.sandbox import Limits, open_sandbox
from arcforge.types import Message, Reward, Task

SYSTEM_HINT = (
    "You can run Python with the `python` tool (print what you need). "
    "End with a line `Answer: <final answer>`."
)


class TIREnv(Env):
    """Math with a sandboxed Python tool.

    Args:
        backend: sandbox backend.
        limits: per-exec limits for the tool.
        tool_timeout: seconds per python call.
    """

    def __init__(
        self, backend: str = "bwrap", limits: Limits | None = None, tool_timeout: float = 10
    ):
        super().__init__()
        self.backend, self.tool_timeout = backend, tool_timeout
        self.limits = limits or Limits(wall_time=30, memory_mb=512, output_bytes=100_000)

    def start(self, task: Task) -> list[Message]:
        self.sb = open_sandbox(self.backend, limits=self.limits)
        summary = "Run a Python 3 program and return its output (print the values you need)."
        self.tools = [python_tool(self.sb, self.tool_timeout, "python", summary)]
        return [Message("user", f"{task.instruction}\n\n{SYSTEM_HINT}")]

    def verify(self) -> Reward:
        if self.task is None:
            return Reward(0.0, {"error": "no episode"})
        ref, final = self.task.validation.answer or "", self.reply or ""
        score = math_reward(final, ref) if final and ref else 0.0
        return Reward(score, {"answer": extract_answer(final), "reference": ref})
