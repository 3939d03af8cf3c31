"""CodeEnv: write a function, graded by hidden unit tests run with pytest in the sandbox.

The agent may try code with a `run_python` tool; its final message's last ```python block is
the solution. A task may carry a HumanEval-style stub (`context["stub"]`: signature and
docstring); a block that does not define the entry point at top level is taken as the body
that completes it (`assemble`), as HumanEval and EvalPlus grade completions. `verify()` restores the sandbox's pristine workspace (dropping anything the agent
wrote while experimenting), writes the solution to solution.py, writes the hidden tests (which
never existed in the sandbox before) and runs pytest as a grading exec with a JUnit XML report
in /grading, which agent execs cannot write. Reward 1 only when every hidden test passed;
details carry passed/total.

This module also holds the grading pytest runner SWEEnv shares (`run_pytest`, `parse_junit`).
The runner starts Python isolated (`-I`: no PYTHONPATH, no user site, no cwd on sys.path, so
no workspace sitecustomize or `pytest.py` shadows the real pytest), prepends the bound pytest
site and *appends* /workspace, and disables the cache provider and bytecode writing.
Deliberate limit: the code under test runs inside the pytest process, so a solution that
monkeypatches pytest at import time could still forge its own report (SWE-bench shares this);
the defence here is against everything outside that process.
"""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from arcforge.envs.base import Env
from arcforge.envs.terminal_env import (
    PYSITE,
    fenced_blocks,
    format_exec,
    open_task_sandbox,
    python_tool,
)
from arcforge.rewards.code import assemble
from arcforge.sandbox import ExecResult, Limits, Sandbox, SandboxError
from arcforge.types import Message, Reward, Task

JUNIT = "/grading/junit.xml"
_RUNNER = (
    "import sys; sys.path[:0] = [{site!r}]; sys.path.append({root!r}); "
    "sys.dont_write_bytecode = True; import pytest; sys.exit(pytest.main(sys.argv[1:]))"
)


@dataclass
class PytestRun:
    """One grading pytest run: per-test status from the JUnit report, plus the raw exec."""

    status: dict[str, str]  # junit key ("pkg.mod::test" / "pkg.mod.Class::test") -> status
    exec: ExecResult
    report_ok: bool  # False when no readable report was written
    errors: list[str] = field(default_factory=list)


def junit_key(node_id: str) -> str:
    """The key `parse_junit` uses for a pytest node id (pytest's own junit name mangling)."""
    names = node_id.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    return ".".join(names[:-1]) + "::" + names[-1]


def parse_junit(xml_text: str) -> dict[str, str]:
    """Map each <testcase> to passed | failed | skipped (a repeated case keeps its worst)."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    out: dict[str, str] = {}
    for case in ET.fromstring(xml_text).iter("testcase"):
        tags = {child.tag for child in case}
        status = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        if rank[status] >= rank[out.get(key, "passed")]:
            out[key] = status
    return out


def run_pytest(
    sb: Sandbox,
    args: list[str],
    timeout: float,
    root: str = "/workspace",
    env: dict[str, str] | None = None,
) -> PytestRun:
    """Run pytest as a grading exec in `root`; the report goes to /grading/junit.xml."""
    sb.exec(f"rm -f {JUNIT}", grading=True)
    code = _RUNNER.format(site=PYSITE, root=root)
    argv = [
        "-p",
        "no:cacheprovider",
        "-q",
        "-rA",
        f"--junitxml={JUNIT}",
        f"--rootdir={root}",
        *args,
    ]
    cmd = "exec /usr/bin/python3 -I -B -c " + " ".join(_quote(a) for a in [code, *argv])
    res = sb.exec(cmd, timeout=timeout, cwd=root, env=env, grading=True)
    try:
        return PytestRun(parse_junit(sb.read_file(JUNIT)), res, True)
    except (SandboxError, ET.ParseError) as err:
        return PytestRun({}, res, False, [f"no readable JUnit report: {err}"])


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def test_names(source: str) -> list[str]:
    """Top-level `test_*` functions of a test module (the tests a report must contain)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    ]


def _all_passed(status: dict[str, str], name: str) -> bool:
    """Every case of test `name` (all its parametrizations) is in the report and passed."""
    hits = [s for k, s in status.items() if k == name or k.startswith(name + "[")]
    return bool(hits) and all(s == "passed" for s in hits)


class CodeEnv(Env):
    """Write-a-function tasks with hidden pytest tests.

    Task fields read: instruction; validation.tests (pytest source importing from `solution`);
    context["stub"] (optional: a reply may complete it); metadata["entry_point"] (which
    function the stub defines; shown in details).

    Args:
        backend: sandbox backend.
        limits: per-exec limits.
        tool_timeout: seconds per `run_python` call.
        verify_timeout: seconds for the hidden tests.
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

    def start(self, task: Task) -> list[Message]:
        self.sb = open_task_sandbox(self.backend, self.limits)
        summary = "Run a Python program in the sandbox and return what it printed."
        self.tools = [python_tool(self.sb, self.tool_timeout, "run_python", summary)]
        return self.opening(task)

    def verify(self) -> Reward:
        """Grade the last ```python block of the final message against the hidden tests."""
        if self.sb is None or self.task is None:
            return Reward(0.0, {"error": "no episode"})
        blocks = fenced_blocks(self.reply or "", ("python", "py", ""))
        tests = self.task.validation.tests or ""
        expected = test_names(tests)
        details: dict[str, Any] = {"passed": 0, "total": len(expected)}
        if not blocks:
            return Reward(0.0, {**details, "error": "no ```python block in the final answer"})
        if not expected:
            return Reward(0.0, {**details, "error": f"task {self.task.id} has no hidden tests"})
        sb = self.sb
        sb.restore()  # the initial snapshot: nothing the agent wrote survives
        entry = self.task.metadata.get("entry_point")
        sb.write_file("solution.py", assemble(blocks[-1], self.task.context.get("stub"), entry))
        sb.write_file("test_hidden.py", tests)
        run = run_pytest(sb, ["test_hidden.py"], self.verify_timeout)
        status = {
            k.split("::")[-1]: s for k, s in run.status.items() if k.startswith("test_hidden::")
        }
        passed = sum(_all_passed(status, n) for n in expected)
        details.update(passed=passed, output=format_exec(run.exec)[-1500:], errors=run.errors)
        return Reward(1.0 if run.report_ok and passed == len(expected) else 0.0, details)
