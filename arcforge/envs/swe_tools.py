"""Function-level code tools for SWEEnv: localize(), view_function(name), replace_function(code).

AutoCodeRover's agent navigates a repository by symbol (`search_method`, `search_class`,
`search_method_in_file`) rather than by path, and ranks functions by spectrum-based fault
localization (SBFL) when the repository has a failing test; Agentless localizes to functions
before it edits. These tools give SWEEnv that interface on top of the sandbox's files:

- `localize()` runs the repository's tests under pytest with a profiler hook that records which
  repository functions each test calls, plus a reproduction of the issue (the call the issue
  text names, checked against the value it says was expected, as SWE-agent's reproduction
  scripts do), ranks functions by the Ochiai score ef / sqrt(F * (ef + ep)) (F failing runs,
  ef / ep the failing / passing runs that call the function) and shows the top one. The tests
  that grade are never among them: like a SWE-bench base commit, the repository lacks the
  tests that fail on the bug, so the reproduction is usually the one failing run (an issue
  without a `Calling `f(...)` (from `path`) ... but X was expected.` line has none, and then
  localize says so when no test fails either).
- `view_function(name)` shows a definition by name.
- `replace_function(code, name="")` writes a new definition, or, when `code` does not define
  the function, a new body under its existing signature and docstring (as a HumanEval
  completion completes a stub; CodeEnv's `assemble`). Without `name` it edits the function
  shown last: SWE-agent's editor likewise edits the file it has open.

Python's own `ast` finds definitions (top-level functions and methods, `Class.method` for a
method), so decorators, docstrings and nested blocks are handled exactly; candidate files come
from a `grep` in the sandbox, so a large repository is not parsed whole. Test files and
directories (`swe_env.is_protected`) are neither searched nor ranked: the grader resets them.

Why no names or paths in the world's flow: the demo's 4-layer model did not copy made-up paths
from an issue into view_file / edit_file (SWE 0 of 4 after SFT), nor the issue's function
name into view_function (the first call named it in 2 of 20 held-out tasks, every other call
a name remembered from training). localize needs no argument,
and a body under the signature shown is what the model writes in the code suite.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
import textwrap
from collections.abc import Callable

from arcforge.sandbox.types import Sandbox, SandboxError
from arcforge.types import Tool
from arcforge.world.code.pysource import Definition, definitions, matches_name, show_definition

# Runs in the sandbox (`python3 - [REPRO]`, this text on stdin): pytest with a plugin that
# records, per test, the (file, qualified name) of every function called under the repository
# root; then the issue's reproduction (REPRO: JSON {module, call, expected}) under the same hook.
_TRACE_RUNNER = r"""
import ast, importlib, json, os, sys
import pytest
ROOT = os.getcwd() + "/"
class Trace:
    def __init__(self):
        self.calls, self.outcome, self.cur = {}, {}, set()
    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(ROOT):
            code = frame.f_code
            self.cur.add((code.co_filename[len(ROOT):], code.co_qualname))
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self.cur = set()
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            self.calls[item.nodeid] = sorted(self.cur)
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome == "failed":
            self.outcome[report.nodeid] = report.outcome
trace = Trace()
code = pytest.main(["-q", "-p", "no:cacheprovider"], plugins=[trace])
if len(sys.argv) > 1:
    repro = json.loads(sys.argv[1])
    sys.path.insert(0, ROOT)
    trace.cur = set()
    sys.setprofile(trace._profile)
    try:
        mod = importlib.import_module(repro["module"])
        ok = eval(repro["call"], dict(vars(mod))) == ast.literal_eval(repro["expected"])
    except Exception:
        ok = False
    finally:
        sys.setprofile(None)
    trace.calls[REPRO_ID] = sorted(trace.cur)
    trace.outcome[REPRO_ID] = "passed" if ok else "failed"
print("@@TRACE@@" + json.dumps({"exit": int(code), "tests": {
    n: [trace.outcome.get(n, "failed"), trace.calls.get(n, [])] for n in trace.outcome}}))
"""


REPRO_ID = "issue reproduction"
_TRACE_RUNNER = _TRACE_RUNNER.replace("REPRO_ID", repr(REPRO_ID))
_ISSUE_CALL = re.compile(
    r"Calling `(?P<call>[^`]+)` \(from `(?P<path>[^`]+\.py)`\) "
    r"(?:returns|raises) .*, but (?P<expected>.+) was expected\.",
    re.S,
)


def reproduction(issue: str) -> dict[str, str] | None:
    """{module, call, expected} of the call an issue text reports ("Calling `f(1)` (from
    `pkg/mod.py`) returns 2, but 3 was expected."), or None when it reports none."""
    m = _ISSUE_CALL.search(issue)
    if m is None:
        return None
    module = m["path"].removesuffix(".py").replace("/", ".")
    if not all(part.isidentifier() for part in module.split(".")):
        return None
    return {"module": module, "call": m["call"], "expected": m["expected"].strip()}


def ochiai(
    tests: dict[str, tuple[str, list[tuple[str, str]]]], keep: Callable[[str], bool]
) -> list[tuple[float, str, str]]:
    """[(score, path, qualname)] of the functions failing tests call, best first: Ochiai
    ef / sqrt(F * (ef + ep)) over `tests` ({node id: (outcome, [(path, qualname)])}); only
    functions whose path passes `keep`, nested code (`f.<locals>.g`, a comprehension) counted
    as its outermost definition. Ties keep the order of path and name."""
    failing = sum(outcome == "failed" for outcome, _ in tests.values())
    if not failing:
        return []
    ef: dict[tuple[str, str], int] = {}
    ep: dict[tuple[str, str], int] = {}
    for outcome, calls in tests.values():
        # a comprehension, lambda or nested def counts as the definition around it
        outer = {(p, q.split(".<", 1)[0]) for p, q in calls}
        for key in {(p, q) for p, q in outer if keep(p) and q and not q.startswith("<")}:
            side = ef if outcome == "failed" else ep
            side[key] = side.get(key, 0) + 1
    scored = [(n / math.sqrt(failing * (n + ep.get(k, 0))), *k) for k, n in ef.items()]
    return sorted(scored, key=lambda r: (-r[0], r[1], r[2]))


def function_tools(
    sb: Sandbox, timeout: float, skip: Callable[[str], bool], issue: str = ""
) -> dict[str, Tool]:
    """localize, view_function and replace_function bound to one sandbox; `skip(rel_path)`
    leaves a file out of the search and the ranking (SWEEnv passes `is_protected`: tests and
    runner files); `issue`: the task's issue text, whose reported call localize reproduces. The
    three share the function shown last, which replace_function edits when it is not given a
    name."""
    repro = reproduction(issue)
    command = "python3 -" + (f" {shlex.quote(json.dumps(repro))}" if repro else "")
    shown: list[tuple[str, str]] = []  # [(path, name)] of the definition shown last

    def find(name: str, path: str) -> tuple[list[tuple[Definition, str]], str]:
        """(definitions of `name` with their file's text, error): files are read once."""
        bare = name.rsplit(".", 1)[-1]
        if not bare.isidentifier():
            return [], f"error: {name!r} is not a function name"
        if path:
            files = [path.removeprefix("/workspace/").removeprefix("./")]
        else:
            pat = shlex.quote(rf"def\s+{bare}\s*\(")
            res = sb.exec(
                f"grep -rlIE --include='*.py' --exclude-dir=.git -e {pat} . | head -n 50",
                timeout=timeout,
            )
            files = [
                f.removeprefix("./") for f in res.stdout.split() if not skip(f.removeprefix("./"))
            ]
        found = []
        for f in sorted(files):
            try:
                text = sb.read_file(f)
            except SandboxError as err:
                return [], f"error: cannot read {f}: {err}"
            found += [(d, text) for d in definitions(text, f) if matches_name(d, name)]
        if not found:
            where = f" in {path}" if path else ""
            return [], f"error: no function {name!r} is defined{where}; use search_code to look"
        return found, ""

    def show(found: list[tuple[Definition, str]]) -> str:
        shown[:] = [(found[0][0].path, found[0][0].name)] if len(found) == 1 else []
        blocks = [show_definition(d, text) for d, text in found[:5]]
        more = f"\n({len(found) - 5} more definitions not shown)" if len(found) > 5 else ""
        return "\n\n".join(blocks) + more

    def localize() -> str:
        """Run the tests and the issue's call, and show the function the failing ones point to
        (spectrum-based fault localization), which replace_function then edits."""
        res = sb.exec(command, timeout=timeout, stdin=_TRACE_RUNNER)
        out = res.stdout.rsplit("@@TRACE@@", 1)
        if len(out) < 2:
            return "error: the tests did not run:\n" + (res.stdout + res.stderr)[-1500:]
        try:
            tests = {
                n: (o, [tuple(c) for c in calls])
                for n, (o, calls) in json.loads(out[1])["tests"].items()
            }
        except (ValueError, TypeError, KeyError) as err:
            return f"error: unreadable test trace ({err})"
        failing = sum(o == "failed" for o, _ in tests.values())
        head = f"{failing} failing, {len(tests) - failing} passing tests"
        if REPRO_ID in tests:
            head += f" (the issue's call included: it {tests[REPRO_ID][0]})"
        if not failing:
            shown.clear()
            return f"{head}: no failing test to localize from; run_tests shows the results"
        ranked = [r for r in ochiai(tests, lambda p: not skip(p)) if r[0] > 0]
        if not ranked:
            shown.clear()
            return f"{head}; the failing tests call no repository function outside the tests"
        lines = [f"{head}; most suspicious functions:"]
        lines += [f"  {score:.2f} {path} {name}" for score, path, name in ranked[:3]]
        _, path, name = ranked[0]
        found, err = find(name, path)
        return "\n".join(lines) + "\n\n" + (err or show(found))

    def view_function(name: str, path: str = "") -> str:
        """Show a function's code with its file and line numbers.

        Args:
            name: e.g. "parse", or "Parser.parse" for a method.
            path: its file, only when several files define it.
        """
        found, err = find(str(name), str(path))
        return err or show(found)

    def replace_function(code: str, name: str = "", path: str = "") -> str:
        """Replace a function's definition with new code.

        Args:
            code: the new definition from its def line, or only the new body below the
                signature and docstring.
            name: the function; empty for the one localize or view_function showed last.
            path: its file, only when several files define it.
        """
        name, path = str(name), str(path)
        if not name:
            if not shown:
                return "error: no function shown yet: call localize or view_function, or pass name"
            path, name = shown[0]
        found, err = find(name, path)
        if err:
            return err
        if len(found) > 1:
            where = ", ".join(f"{d.path}:{d.start}" for d, _ in found[:10])
            return f"error: {name!r} is defined {len(found)} times ({where}); pass path"
        (d, source), bare = found[0], name.rsplit(".", 1)[-1]
        code = textwrap.dedent(str(code).strip("\n")) + "\n"
        lines = source.splitlines(keepends=True)
        try:
            tops = [
                n.name
                for n in ast.parse(code).body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
        except SyntaxError:
            tops = []
        if tops and bare not in tops:
            return (
                f"error: code defines {', '.join(tops)}, not {bare!r}: write the definition "
                f"of {bare!r} (def {bare}(...):) or only its body"
            )
        if tops:
            first = lines[d.start - 1]
            indent = first[: len(first) - len(first.lstrip())]
            start = d.start
        else:  # a body: under the existing signature and docstring
            start = d.body
            first = lines[start - 1] if start <= d.end else ""
            indent = first[: len(first) - len(first.lstrip())]
            if not indent:  # the body is only a docstring: one level below the def line
                indent = " " * (len(lines[d.start - 1]) - len(lines[d.start - 1].lstrip()) + 4)
        new = "".join(
            indent + ln if ln.strip() else ln for ln in code.rstrip("\n").splitlines(keepends=True)
        )
        text = "".join(lines[: start - 1]) + new + "\n" + "".join(lines[d.end :])
        try:
            ast.parse(text)
        except SyntaxError as e:
            return (
                f"error: the file would not parse after the replacement (line {e.lineno}: {e.msg})"
            )
        sb.write_file(d.path, text)
        shown[:] = [(d.path, d.name)]
        return f"ok: replaced {d.name} in {d.path} (lines {d.start}-{d.end})"

    tools = (localize, view_function, replace_function)
    return {f.__name__: Tool.from_function(f) for f in tools}
