"""Verifiable reward for code: run hidden unit tests against the response's solution.

The response's last fenced code block (```python ... ```, else any ``` block, else the whole
text) becomes `solution.py`; the hidden tests are copied in as `test_solution.py` only when the
grader runs; pytest runs inside a fresh sandbox (bwrap by default: no network, read-only host)
under a wall/CPU time limit. Score 1.0 only when pytest collected exactly the expected number
of tests and every one passed, read from a JUnit report under /grading.

Deliberate simplifications: the solution's import-time code runs in the grading exec (it is
what pytest imports), so a solution written to attack the grader could forge the report; the
report's randomized name and the test-count check stop accidents, not an adversary. pytest
comes from the host's site-packages, bound read-only (see arcforge.sandbox).
"""

from __future__ import annotations

import ast
import math
import re
import secrets
import xml.etree.ElementTree as ET

from arcforge.sandbox import Limits, SandboxError, host_site_packages, open_sandbox
from arcforge.types import Reward

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_TEST_DEF = re.compile(r"^\s*def (test_\w+)\s*\(", re.MULTILINE)


def extract_code(response: str) -> str:
    """The last ```python block, else the last ``` block, else the whole response."""
    blocks = _FENCE.findall(response)
    py = [body for lang, body in blocks if lang.lower() in ("python", "py", "python3")]
    if py:
        return py[-1]
    if blocks:
        return blocks[-1][1]
    return response.strip() + "\n"


def _junit_counts(xml: str) -> dict[str, int]:
    root = ET.fromstring(xml)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def run_unit_tests(
    solution: str,
    tests: str,
    *,
    time_limit: float = 10.0,
    backend: str = "bwrap",
    module: str = "solution",
) -> Reward:
    """Run `tests` (pytest source importing `module`) against `solution` source in a sandbox.

    Args:
        solution: Python source written to `<module>.py`.
        tests: hidden pytest source, written to `test_<module>.py` at grading time only.
        time_limit: wall-clock seconds (and CPU seconds, rounded up) for the whole pytest run.
        backend: sandbox backend ("bwrap", "docker", or "local", which is unsandboxed).
    Returns:
        Reward(1.0 if all expected tests passed else 0.0, details with the counts, exit code,
        timed_out and the tail of pytest's output).
    """
    expected = len(set(_TEST_DEF.findall(tests)))
    report = f"/grading/junit-{secrets.token_hex(8)}.xml"
    limits = Limits(wall_time=time_limit, cpu_seconds=max(1, math.ceil(time_limit)))
    kw = {"env": {"PYTHONPATH": "/opt/pysite", "PYTHONDONTWRITEBYTECODE": "1"}}
    if backend == "bwrap":
        kw["extra_ro_binds"] = {host_site_packages(): "/opt/pysite"}
    details: dict = {"expected": expected}
    try:
        with open_sandbox(backend, limits=limits, trusted=backend == "local", **kw) as sb:
            sb.write_file(f"{module}.py", solution)
            sb.write_file(f"test_{module}.py", tests)  # hidden until now: grading time
            res = sb.exec(
                f"python3 -m pytest -q -p no:cacheprovider --junitxml={report} test_{module}.py",
                grading=True,
            )
            details.update(
                exit_code=res.exit_code,
                timed_out=res.timed_out,
                output=(res.stdout + res.stderr)[-800:],
            )
            try:
                counts = _junit_counts(sb.read_file(report))
            except (SandboxError, ET.ParseError, OSError, ValueError):
                counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    except SandboxError as err:
        return Reward(0.0, {**details, "error": f"sandbox: {err}"})
    details.update(counts)
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    details["passed"] = passed
    ok = res.exit_code == 0 and not res.timed_out and expected > 0 and passed == expected
    return Reward(1.0 if ok else 0.0, details)


def assemble(block: str, stub: str | None, entry_point: str | None) -> str:
    """The solution module for a reply's code block: the block itself when it defines
    `entry_point` at top level (or the task has no stub), else `stub` + block."""
    if not stub or not entry_point:
        return block
    try:
        tree = ast.parse(block)
    except SyntaxError:  # an indented body alone does not parse
        tree = None
    if tree is not None and any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == entry_point
        for n in tree.body
    ):
        return block
    return (stub if stub.endswith("\n") else stub + "\n") + block


def code_reward(
    response: str,
    tests: str,
    time_limit: float = 10.0,
    backend: str = "bwrap",
    stub: str | None = None,
    entry_point: str | None = None,
) -> Reward:
    """Extract the solution from a model response and run the hidden tests against it. With a
    HumanEval-style `stub`, a response that does not define `entry_point` completes it."""
    code = assemble(extract_code(response), stub, entry_point)
    return run_unit_tests(code, tests, time_limit=time_limit, backend=backend)
