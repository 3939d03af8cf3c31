"""ChainEnv: multi-step coding where every step re-runs all earlier steps' tests (regression).

A chain task (`arcforge.world.tasks.chains`) lists steps; the episode opens with step 1. Each
assistant reply without tool calls submits that step: the last ```python block is appended to
the module `solution.py` (later definitions override earlier ones, as in a real file that
grows). The grader then restores the pristine sandbox, writes the module and the hidden tests
of steps 1..k (never present before grading), and runs pytest as a grading exec (JUnit report
in /grading, see code_env). The step's record: its own tests passed, earlier tests still
passing. The next step arrives as a new user message that also says how the check went; after
the last step the episode ends. `run_python` lets the agent try code between submissions.

Reward 1.0 iff every step's check passed (own and all earlier tests) when it was made; details
carry per-step results, the regressions and the number of steps completed.
"""

from __future__ import annotations

from typing import Any

from arcforge.envs.base import Env, StepResult
from arcforge.envs.code_env import run_pytest, test_names
from arcforge.envs.terminal_env import fenced_blocks, open_task_sandbox, python_tool
from arcforge.sandbox import Limits
from arcforge.types import Message, Reward, Task


class ChainEnv(Env):
    """Chained steps over one growing module, graded after every step.

    Args:
        backend: sandbox backend.
        limits: per-exec limits.
        tool_timeout: seconds per `run_python` call; verify_timeout: seconds per grading run.
    """

    def __init__(
        self,
        backend: str = "bwrap",
        limits: Limits | None = None,
        tool_timeout: float = 10,
        verify_timeout: float = 60,
    ) -> None:
        super().__init__()
        self.backend, self.limits = backend, limits or Limits(wall_time=verify_timeout)
        self.tool_timeout, self.verify_timeout = tool_timeout, verify_timeout
        self.module = ""  # the module so far: each step's last python block appended
        self.results: list[dict[str, Any]] = []  # one grading per step

    def check(self, task: Task) -> None:
        if not task.metadata.get("steps"):
            raise ValueError(f"task {task.id}: a chain task needs metadata['steps']")

    def start(self, task: Task) -> list[Message]:
        self.module, self.results = "", []
        self.sb = open_task_sandbox(self.backend, self.limits)
        summary = "Run a Python program in the sandbox and return what it printed."
        self.tools = [python_tool(self.sb, self.tool_timeout, "run_python", summary)]
        return self.opening(task)

    def _grade(self, k: int) -> dict[str, Any]:
        """Grade the module against the tests of steps 0..k."""
        assert self.sb is not None and self.task is not None
        steps = self.task.metadata["steps"]
        sb = self.sb
        sb.restore()
        sb.write_file("solution.py", self.module)
        files = []
        for i in range(k + 1):
            sb.write_file(f"test_step{i}.py", steps[i]["tests"])
            files.append(f"test_step{i}.py")
        run = run_pytest(sb, files, self.verify_timeout)
        ok = []
        for i in range(k + 1):
            names = test_names(steps[i]["tests"])
            got = [run.status.get(f"test_step{i}::{n}") for n in names]
            ok.append(run.report_ok and bool(names) and all(s == "passed" for s in got))
        return {
            "step": k + 1,
            "own": ok[k],
            "earlier": all(ok[:k]),
            "broken": [i + 1 for i in range(k) if not ok[i]],
        }

    def finish(self, message: Message) -> StepResult:
        """A reply without tool calls submits its last code block as the next step."""
        assert self.task is not None
        k = len(self.results)
        blocks = fenced_blocks(message.content, ("python", "py", ""))
        if blocks:
            self.module = (self.module + "\n\n" + blocks[-1]).strip() + "\n"
        res = self._grade(k)
        res["submitted"] = bool(blocks)
        self.results.append(res)
        steps = self.task.metadata["steps"]
        if k + 1 >= len(steps):
            return StepResult([], True)
        verdict = ("passed" if res["own"] else "failed") + (
            "" if res["earlier"] else f"; earlier steps now failing: {res['broken']}"
        )
        nxt = f"Step {k + 1} check: {verdict}.\n\nStep {k + 2}: {steps[k + 1]['instruction']}"
        return StepResult([Message("user", nxt)], False)

    def verify(self) -> Reward:
        if self.task is None:
            return Reward(0.0, {"error": "no episode"})
        n = len(self.task.metadata["steps"])
        good = [r["own"] and r["earlier"] for r in self.results]
        details = {
            "steps": n,
            "completed": len(self.results),
            "per_step": self.results,
            "regressions": sum(bool(r["broken"]) for r in self.results),
            "steps_passed": sum(good),
        }
        return Reward(1.0 if len(good) == n and all(good) else 0.0, details)
