"""Run a candidate's tests in the sandbox in each repository state and derive F2P / P2P.

States (each a plain directory tree): `after` = base + test patch + fix, `before` = base + test
patch, `base` = the base commit alone (synthetic bugs have no test patch, so `before` is the
base). Node ids are collected once, in `after` (where the new tests import), then every state
runs the same test files `runs` times in one sandbox, restored to its pristine snapshot before
each run. Tests run exactly as the SWE grader runs them (`code_env.run_pytest`: isolated
python, /workspace appended to sys.path, JUnit report in /grading), so F2P/P2P computed here
are the ones SWEEnv will check. A repository with an install (swe_venv) runs under its own
environment, bound where the runner looks for packages; every run has `swe_limits` (memory as
data segment, threads allowed), the limits grading uses too.

A test whose status is not the same in every run of some state is flaky and is dropped.
F2P: passed in every `after` run and in no `before` run. P2P: passed in every run of both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arcforge.envs.code_env import junit_key, run_pytest
from arcforge.envs.swe_venv import RepoEnv, open_env_sandbox, swe_limits
from arcforge.envs.terminal_env import format_exec


@dataclass
class StateRuns:
    """One state's runs: per run, node id -> passed | failed | skipped | missing."""

    runs: list[dict[str, str]] = field(default_factory=list)
    output: str = ""  # the last run's pytest output (tail), for problem statements

    def flaky(self) -> set[str]:
        ids = set().union(*[set(r) for r in self.runs]) if self.runs else set()
        return {i for i in ids if len({r.get(i, "missing") for r in self.runs}) > 1}

    def always(self, node: str, status: str) -> bool:
        return bool(self.runs) and all(r.get(node, "missing") == status for r in self.runs)


@dataclass
class Classified:
    f2p: list[str]
    p2p: list[str]
    flaky: list[str]
    collected: int


def collect(
    tree: Path,
    files: list[str],
    backend: str = "bwrap",
    timeout: float = 300,
    env: RepoEnv | None = None,
) -> tuple[list[str], str]:
    """Pytest node ids of `files` in `tree` (collect-only, in the sandbox), and pytest's output
    (it explains an empty collection: an import error, a missing dependency)."""
    files = [f for f in files if (tree / f).is_file()]
    if not files:
        return [], "none of the test files exists in this state"
    with open_env_sandbox(backend, swe_limits(timeout), env, tree) as sb:
        # an absolute verbosity after the repository's addopts (which may say -v): node ids
        res = run_pytest(sb, ["--collect-only", "--verbosity=-1", *files], timeout)
    lines = (ln.strip() for ln in res.exec.stdout.splitlines())
    ids = [ln for ln in lines if "::" in ln and not ln.startswith(("=", "<", "ERROR"))]
    return ids, format_exec(res.exec)[-8000:]


def collect_ids(
    tree: Path, files: list[str], backend: str = "bwrap", timeout: float = 300
) -> list[str]:
    """Pytest node ids of `files` in `tree` (collect-only, in the sandbox)."""
    return collect(tree, files, backend, timeout)[0]


def run_state(
    tree: Path,
    files: list[str],
    ids: list[str],
    runs: int = 3,
    backend: str = "bwrap",
    timeout: float = 300,
    env: RepoEnv | None = None,
) -> StateRuns:
    """Run `files` `runs` times in one sandbox over `tree`; statuses of `ids` per run."""
    present = [f for f in files if (tree / f).is_file()]
    out = StateRuns()
    if not present:
        out.runs = [dict.fromkeys(ids, "missing") for _ in range(runs)]
        return out
    with open_env_sandbox(backend, swe_limits(timeout), env, tree) as sb:
        snap = sb.snapshot()
        for i in range(runs):
            if i:
                sb.restore(snap)
            run = run_pytest(sb, present, timeout)
            out.runs.append({n: run.status.get(junit_key(n), "missing") for n in ids})
            out.output = format_exec(run.exec)[-8000:]
    return out


def classify(
    ids: list[str], after: StateRuns, before: StateRuns, base: StateRuns | None = None
) -> Classified:
    """F2P / P2P / flaky from the runs of each state (see the module docstring)."""
    flaky = after.flaky() | before.flaky() | (base.flaky() if base else set())
    f2p, p2p = [], []
    for n in ids:
        if n in flaky or not after.always(n, "passed"):
            continue
        if before.always(n, "passed"):
            p2p.append(n)
        elif not any(r.get(n) == "passed" for r in before.runs):
            f2p.append(n)
    return Classified(f2p, p2p, sorted(flaky & set(ids)), len(ids))


def failure_lines(output: str, limit: int = 12) -> list[str]:
    """The assertion / error lines pytest printed (lines starting with "E   ")."""
    lines = [ln[1:].strip() for ln in output.splitlines() if ln.startswith("E ")]
    seen: list[str] = []
    for ln in lines:
        if ln and ln not in seen:
            seen.append(ln)
    return seen[:limit]
