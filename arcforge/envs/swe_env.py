"""SWEEnv: fix an issue in a repository snapshot; graded by FAIL_TO_PASS / PASS_TO_PASS tests.

The workspace is the repository at its base commit with no future: a fresh `git init` and one
commit of the base tree (no later commits, no other refs, no reflog, no packed objects of the
fix). World tasks build it from the `Repo` with the bug applied; imported SWE-bench instances
from `git archive <base_commit>` of a local clone (context["repo_path"]). Tools: localize
(spectrum-based fault localization over the visible tests and a reproduction of the issue's
call, as AutoCodeRover's SBFL and SWE-agent's reproduction scripts),
view_function and replace_function (by symbol, as AutoCodeRover's search_method; `swe_tools`),
view_file, search_code, edit_file (exact replace), run_tests (the visible tests), bash.

Grading (`verify`), designed so nothing the agent can write decides the verdict:
1. the agent's workspace is copied out to the host and sanitised there against the base tree:
   every test file (test_*.py, *_test.py, anything under tests/, test/, testing/), every
   conftest.py, pytest.ini/.pytest.ini/tox.ini/setup.cfg/pyproject.toml (pytest reads its
   config from these), sitecustomize.py/usercustomize.py and *.pth files are reset to the base
   version, or deleted when the agent added them; deleted ones come back; __pycache__/*.pyc are
   removed (a forged assertion-rewrite cache could replace a test). Base conftests and configs
   stay: they are the repository's own and real repos need their fixtures.
2. the hidden/updated test files (world: `validation.tests`, the buggy module's test file with
   the bug's FAIL_TO_PASS tests added; SWE-bench: the files after test_patch) overwrite
   whatever is at their paths; this tree replaces the workspace. They exist only on the host
   until then: the workspace of a world task holds the visible tests minus those that fail
   under the bug (as a SWE-bench base commit lacks the F2P tests), and no tool reads the task.
3. pytest runs as a grading exec through the isolated runner of code_env (python -I: no cwd
   or PYTHONPATH shadowing of pytest, /workspace appended to sys.path) on the files holding the
   F2P/P2P tests, writing JUnit XML to /grading, which agent execs can only read.
4. reward 1 iff every F2P and P2P id is in the report and passed; skipped or missing = failed.
Printed "PASSED" lines are never read. Residual risk (shared with SWE-bench): the patched code
itself runs inside the pytest process; see code_env's header.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcforge.envs.base import Env
from arcforge.envs.code_env import junit_key, run_pytest
from arcforge.envs.swe_tools import function_tools
from arcforge.envs.terminal_env import format_exec, open_task_sandbox, sandbox_tools
from arcforge.sandbox import ExecResult, Limits
from arcforge.types import Message, Reward, Task, Tool
from arcforge.world.code.pysource import SWE_TOOLS
from arcforge.world.code.repos import Repo

TEST_DIRS = {"tests", "test", "testing"}
RUNNER_FILES = {
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "usercustomize.py",
}
_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "arcforge",
    "GIT_AUTHOR_EMAIL": "swe@arcforge.local",
    "GIT_COMMITTER_NAME": "arcforge",
    "GIT_COMMITTER_EMAIL": "swe@arcforge.local",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


def offered_tools(task: Task, known: tuple[str, ...]) -> list[str]:
    """The tools an episode offers: the task's own list (`Task.tools`, in the env's order) when
    it has one, else every tool the env knows. A task picks a subset because every tool's schema
    sits in the prompt: the world's SWE tasks offer localize, view_function, replace_function
    and run_tests (`WORLD_SWE_TOOLS`; all eight schemas would take over half of the demo
    model's 2048 tokens of context), which cover what the path-based tools do there."""
    if not task.tools:
        return list(known)
    unknown = sorted(set(task.tools) - set(known))
    if unknown:
        raise ValueError(
            f"task {task.id} lists tools SWEEnv does not have: {', '.join(unknown)}; "
            f"known: {', '.join(known)}"
        )
    return [n for n in known if n in task.tools]


def is_protected(rel: str) -> bool:
    """Paths that decide how tests run, so the grader resets them to the base version."""
    parts = rel.split("/")
    name = parts[-1]
    test_file = name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    return (
        name in RUNNER_FILES
        or name.endswith((".pth", ".pyc"))
        or test_file
        or any(p in TEST_DIRS for p in parts[:-1])
    )


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {**os.environ, **_GIT_ENV}
    res = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {res.stderr.decode()[-500:]}")
    return res.stdout


def fresh_repo(base: Path, dst: Path) -> None:
    """`dst` = a copy of `base` as a brand-new repository with a single commit (no history)."""
    shutil.copytree(base, dst, symlinks=True)
    _git(dst, "init", "-q", "-b", "main")
    _git(dst, "add", "-A")
    _git(dst, "commit", "-q", "--no-verify", "-m", "base")


@dataclass
class Snapshot:
    """The host-side truth of one episode: the base tree and the test files as graded."""

    base: Path
    hidden: dict[str, str | None]  # repo path -> graded content (None: the test patch deletes it)


def world_snapshot(task: Task, repos: dict[str, Repo], root: Path) -> Snapshot:
    """Base tree of a world SWE task: the repo's files with the injected bug, its test files
    without the tests the bug fails; the hidden test files come from `validation.tests`."""
    name = task.context.get("repo")
    origin = task.context.get("renamed_from", name)
    if origin not in repos:
        raise ValueError(
            f"task {task.id}: repo {origin!r} unknown; pass the world's repos to SWEEnv"
        )
    repo, bug = repos[origin], task.context["bug"]
    if origin != name:  # a train task in a renamed copy (world option swe_fresh_repos)
        repo = repo.renamed(name)
    if task.context.get("functions_renamed"):  # made-up names (world option swe_fresh_functions)
        repo = repo.functions_renamed(task.context["functions_renamed"])
    base = root / "base"
    repo.materialize(base)
    (base / bug["path"]).write_text(bug["mutated"])
    for rel, text in repo.workspace_tests(bug.get("removed_tests", [])).items():
        (base / rel).write_text(text)
    try:
        hidden = json.loads(task.validation.tests or "{}")
    except ValueError as err:
        raise ValueError(f"task {task.id}: validation.tests is not a JSON test file map") from err
    return Snapshot(base, hidden)


def clone_snapshot(task: Task, root: Path) -> Snapshot:
    """Base tree of an imported SWE-bench instance: `git archive` of base_commit in the clone,
    plus the test files as they are after test_patch."""
    clone, commit = Path(task.context["repo_path"]), task.context["base_commit"]
    base = root / "base"
    base.mkdir()
    tar = _git(clone, "archive", "--format=tar", commit)
    subprocess.run(["tar", "-x", "-C", str(base)], input=tar, check=True)
    patch = task.metadata.get("test_patch") or ""
    touched = sorted(
        {
            ln.split(" b/", 1)[1]
            for ln in patch.splitlines()
            if ln.startswith("diff --git a/") and " b/" in ln
        }
    )
    scratch = root / "hidden"
    scratch.mkdir()
    for rel in touched:
        if (base / rel).is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, scratch / rel)
    if patch:
        _git(scratch, "apply", "--whitespace=nowarn", "-", stdin=patch.encode())
    hidden = {r: (scratch / r).read_text() if (scratch / r).is_file() else None for r in touched}
    return Snapshot(base, hidden)


def _place(tree: Path, rel: str, src: Path | None, text: str | None = None) -> None:
    """Put `src` (or `text`, or nothing) at tree/rel, replacing symlinked or non-dir parents."""
    cur = tree
    for part in Path(rel).parts[:-1]:
        cur = cur / part
        if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
            cur.unlink()
        cur.mkdir(exist_ok=True)
    dst = tree / rel
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.is_dir():
        shutil.rmtree(dst)
    if src is not None:
        shutil.copy2(src, dst)
    elif text is not None:
        dst.write_text(text)


def sanitize(tree: Path, snap: Snapshot) -> list[str]:
    """Reset every protected path of the agent's `tree` to the base/hidden version (in place).

    Returns the paths where the agent's version differed (reverted, deleted or restored)."""
    agent: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        d = Path(dirpath)
        for name in list(dirnames):
            if name == "__pycache__" and not (d / name).is_symlink():
                shutil.rmtree(d / name)
                dirnames.remove(name)
            elif (d / name).is_symlink():  # a linked dir is never descended into: treat as file
                filenames.append(name)
                dirnames.remove(name)
        for name in filenames:
            p, rel = d / name, (d / name).relative_to(tree).as_posix()
            if is_protected(rel) or (p.is_symlink() and name in TEST_DIRS):
                agent[rel] = None if p.is_symlink() or not p.is_file() else p.read_bytes()
                p.unlink()
    want: dict[str, bytes | None] = {}
    for p in sorted(snap.base.rglob("*")):
        rel = p.relative_to(snap.base).as_posix()
        if p.is_file() and not p.is_symlink() and is_protected(rel):
            _place(tree, rel, p)
            want[rel] = p.read_bytes()
    for rel, text in snap.hidden.items():
        _place(tree, rel, None, text)
        want[rel] = None if text is None else text.encode()
    return sorted(r for r in set(agent) | set(want) if agent.get(r, b"") != want.get(r, b""))


_DURATION = re.compile(
    r"^(.*\b(?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|"
    r"warnings?|no tests ran)\b.*?) in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?( =+)?$",
    re.M,
)


def strip_durations(text: str) -> str:
    """Drop pytest's wall-clock time from its summary lines ("12 passed in 0.04s" -> "12 passed"):
    an observation must not depend on machine load, or recorded expert episodes (and so the
    SFT data and every later stage) would differ from run to run."""
    return _DURATION.sub(r"\1\2", text)


class SWEEnv(Env):
    """Repository-level bug fixing (world SWE tasks and imported SWE-bench instances).

    Args:
        repos: the world's repos (needed for world tasks; imported tasks carry a clone path).
        backend: sandbox backend.
        limits: per-exec limits.
        tool_timeout: seconds per tool exec.
        verify_timeout: seconds for the grading pytest run.
    """

    tool_names = SWE_TOOLS

    def __init__(
        self,
        repos: Iterable[Repo] = (),
        backend: str = "bwrap",
        limits: Limits | None = None,
        tool_timeout: float = 60,
        verify_timeout: float = 300,
    ):
        super().__init__()
        self.backend, self.limits = backend, limits or Limits(wall_time=verify_timeout)
        self.tool_timeout, self.verify_timeout = tool_timeout, verify_timeout
        self.repos = {r.name: r for r in repos}
        self.snap: Snapshot | None = None
        self.tmp: Path | None = None

    def check(self, task: Task) -> None:
        reasons = task.metadata.get("unsupported") or []
        if reasons:
            raise ValueError(f"task {task.id} is unsupported here: {'; '.join(reasons)}")

    def start(self, task: Task) -> list[Message]:
        """Build the history-free base repo on the host and open a sandbox over a copy of it."""
        self.tmp = Path(tempfile.mkdtemp(prefix="arcforge-swe-"))
        if "repo_path" in task.context:
            self.snap = clone_snapshot(task, self.tmp)
        else:
            self.snap = world_snapshot(task, self.repos, self.tmp)
        fresh_repo(self.snap.base, self.tmp / "work")
        # no .pyc: an edit within the same second that keeps a module's size (`n - 1` ->
        # `n + 1`) would otherwise leave the old bytecode in use for the next test run
        self.sb = open_task_sandbox(
            self.backend,
            self.limits,
            workspace=self.tmp / "work",
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )
        tools = sandbox_tools(self.sb, self.tool_timeout)
        tools["run_tests"] = Tool.from_function(self._run_tests, name="run_tests")
        tools.update(function_tools(self.sb, self.tool_timeout, is_protected, task.instruction))
        self.tools = [tools[n] for n in offered_tools(task, self.tool_names)]
        return self.opening(task)

    def _run_tests(self, path: str = "") -> str:
        """Run the repository's tests with pytest (all, or one file / node id) and show results.

        Args:
            path: a test file or node id relative to the repo root; empty runs every test.
        """
        assert self.sb is not None
        target = "'" + path.replace("'", "'\\''") + "'" if path else ""
        res = self.sb.exec(
            f"python3 -m pytest -q -p no:cacheprovider {target}", timeout=self.tool_timeout
        )
        return strip_durations(format_exec(res))[-6000:]

    def apply_patch(self, patch: str) -> ExecResult:
        """Apply a unified diff in the workspace as the agent could (used by check and tests)."""
        assert self.sb is not None, "call reset(task) first"
        self.sb.write_file(".arcforge.patch", patch)
        return self.sb.exec(
            "git apply --whitespace=nowarn .arcforge.patch || patch -p1 -f "
            "< .arcforge.patch; rc=$?; rm -f .arcforge.patch; exit $rc"
        )

    def verify(self) -> Reward:
        """Sanitise, copy hidden tests in, run F2P+P2P under pytest, read the JUnit report."""
        if self.sb is None or self.task is None or self.snap is None or self.tmp is None:
            return Reward(0.0, {"error": "no episode"})
        v, sb = self.task.validation, self.sb
        ids = [*v.fail_to_pass, *v.pass_to_pass]
        if not v.fail_to_pass:
            return Reward(0.0, {"error": f"task {self.task.id} has no FAIL_TO_PASS tests"})
        sb.exec("chmod -R u+rwX /workspace 2>/dev/null; true")
        graded = self.tmp / "graded"
        shutil.rmtree(graded, ignore_errors=True)
        sb.copy_out("/workspace", graded)
        reverted = sanitize(graded, self.snap)
        sb.exec("find /workspace -mindepth 1 -delete")
        sb.copy_in(graded, "/workspace")
        files = sorted({i.split("::")[0] for i in ids})
        run = run_pytest(sb, files, self.verify_timeout)
        status = {i: run.status.get(junit_key(i), "missing") for i in ids}
        f2p = sum(status[i] == "passed" for i in v.fail_to_pass)
        p2p = sum(status[i] == "passed" for i in v.pass_to_pass)
        bad = {i: s for i, s in status.items() if s != "passed"}
        details: dict[str, Any] = {
            "f2p": {"passed": f2p, "total": len(v.fail_to_pass)},
            "p2p": {"passed": p2p, "total": len(v.pass_to_pass)},
            "not_passed": dict(list(bad.items())[:20]),
            "reverted": reverted[:50],
            "exit_code": run.exec.exit_code,
            "errors": run.errors,
            "output": format_exec(run.exec)[-1500:],
        }
        return Reward(1.0 if run.report_ok and not bad else 0.0, details)

    def close(self) -> None:
        super().close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
