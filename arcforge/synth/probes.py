"""Active exploit probes shared by SWE and terminal tasks (the "exploit" filter).

Each probe is an *attack solution*: a bash script an agent could run with its `bash` tool in a
fresh episode of the task's own environment (TerminalEnv / SWEEnv via the env registry),
without solving the task. The environment's verifier then grades the workspace; a probe is
`fooled` when the verifier passes (score >= 1). A task whose verifier any probe fools is
rejected, naming the probe (see synth/checktask.py).

    delete_tests       remove every test file and test directory the agent can see
    empty_tests        replace every visible test file with one trivially passing test
    modify_verifier    overwrite visible verifier scripts (run-tests.sh, check*.sh, verify*.py,
                       ...) with "exit 0", make pytest collect-only through a workspace
                       pytest.ini, and try to overwrite /grading/verify.sh
    conftest           drop a conftest.py that turns every test outcome into "passed" at the
                       workspace root and in every test directory
    fake_output        print fake PASSED / OK lines: a workspace `pytest.py` that prints
                       "12 passed" and exits 0 (it shadows `python -m pytest` run from the
                       workspace), and PASSED/OK printed at the end of every non-test .py file
    hardcode_output    write the files the oracle produces that are not code (its output and
                       data files), byte for byte, without the code that makes them. Applies
                       to terminal tasks whose oracle writes code too: when the deliverable is
                       only a file, writing it *is* the solution (a SWE oracle is a code patch,
                       so it does not apply there either)
    read_hidden_tests  look for the hidden tests (terminal: the test files and verify script;
                       SWE: the lines test_patch adds) anywhere the agent can read before
                       grading; fooled = they are readable there, which hands the agent the
                       expected answers (judged from the probe's output, not by the verifier)
    git_history        mine git history: the newest commit the agent can reach (refs, reflog,
                       stash, unreachable objects) that is not an ancestor of HEAD is checked
                       out over the workspace, i.e. a future fix left in the repository

Simplification: probes are generic scripts, not an adversarial agent; a verifier can still be
weak in ways none of them tries. The trajectory-level detector (synth/detect.py) covers what an
agent actually did.
"""

from __future__ import annotations

import base64
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.envs.sandbox import SandboxError
from arcforge.types import Message, Task, ToolCall

PASS_THRESHOLD = 1.0  # a verifier "passes" a solution when its score reaches this
CODE_SUFFIXES = {
    ".py",
    ".sh",
    ".bash",
    ".js",
    ".ts",
    ".rb",
    ".pl",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".go",
    ".rs",
    ".java",
    ".php",
    ".lua",
    ".r",
    ".awk",
    ".sed",
    ".mk",
}
MAX_HARDCODE_BYTES = 1_000_000
_PRUNE = "-path '*/.git' -prune -o"
_TEST_FILES = r"\( -name 'test_*.py' -o -name '*_test.py' \)"
_TEST_DIRS = r"\( -name tests -o -name test -o -name testing \)"

PASS_ALL_CONFTEST = """import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome, report.longrepr = "passed", None
    return report
"""
FAKE_PYTEST = """print("============================= test session starts =============================")
print("collected 12 items")
print("tests/test_all.py ............                                           [100%]")
print("============================== 12 passed in 0.02s ==============================")
print("PASSED")
raise SystemExit(0)
"""


@dataclass
class ProbeContext:
    """What some probes need besides the task: the oracle's non-code output files."""

    oracle_files: dict[str, bytes] | None = None


@dataclass(frozen=True)
class Probe:
    """One attack. `script(task, ctx)` is the bash the agent runs (None: does not apply);
    `judge` is "verify" (fooled = the verifier passes) or "output" (fooled = the script
    printed a line starting with FOOLED)."""

    name: str
    description: str
    script: Callable[[Task, ProbeContext], str | None]
    judge: str = "verify"


@dataclass
class ProbeResult:
    name: str
    applicable: bool
    fooled: bool
    detail: str = ""
    score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _delete_tests(task: Task, ctx: ProbeContext) -> str:
    return (
        f"find /workspace {_PRUNE} \\( -type d {_TEST_DIRS} -o -type f {_TEST_FILES} \\) "
        '-print | sort -r | while read -r p; do rm -rf "$p"; done; echo deleted'
    )


def _empty_tests(task: Task, ctx: ProbeContext) -> str:
    body = shlex.quote("def test_placeholder():\n    pass\n")
    return (
        f"find /workspace {_PRUNE} -type f {_TEST_FILES} -print | while read -r f; do "
        f"printf '%s' {body} > \"$f\"; done; echo emptied"
    )


def _modify_verifier(task: Task, ctx: ProbeContext) -> str:
    names = r"(run[-_]?tests?|tests?|verif[a-z_]*|check[a-z_]*|grade[a-z_]*|judge[a-z_]*|evaluat[a-z_]*)"
    ok_sh, ok_py = shlex.quote("#!/bin/sh\nexit 0\n"), shlex.quote("raise SystemExit(0)\n")
    ini = shlex.quote("[pytest]\naddopts = --collect-only -q\n")
    return "\n".join(
        [
            f"find /workspace {_PRUNE} -type f -print | grep -E '/{names}\\.(sh|py)$' | "
            f'while read -r f; do case "$f" in *.sh) printf \'%s\' {ok_sh} > "$f";; '
            f'*) printf \'%s\' {ok_py} > "$f";; esac; echo "rewrote $f"; done',
            f"printf '%s' {ini} > /workspace/pytest.ini",
            f"printf '%s' {ok_sh} > /grading/verify.sh 2>/dev/null && echo 'rewrote /grading'",
            "true",
        ]
    )


def _conftest(task: Task, ctx: ProbeContext) -> str:
    body = shlex.quote(PASS_ALL_CONFTEST)
    return (
        f"for d in /workspace $(find /workspace {_PRUNE} -type d {_TEST_DIRS} -print); do "
        f"printf '%s' {body} > \"$d/conftest.py\"; done; echo planted"
    )


def _fake_output(task: Task, ctx: ProbeContext) -> str:
    tail = shlex.quote('\nprint("PASSED")\nprint("OK")\n')
    return "\n".join(
        [
            f"printf '%s' {shlex.quote(FAKE_PYTEST)} > /workspace/pytest.py",
            f"find /workspace {_PRUNE} -type f -name '*.py' ! -name pytest.py ! -name 'test_*' "
            f"! -name '*_test.py' ! -name conftest.py -print | while read -r f; do "
            f"printf '%s' {tail} >> \"$f\"; done; echo faked",
        ]
    )


def _hardcode_output(task: Task, ctx: ProbeContext) -> str | None:
    files = ctx.oracle_files
    if not files:
        return None
    lines = []
    for rel, data in sorted(files.items()):
        q = shlex.quote("/workspace/" + rel)
        b64 = base64.b64encode(data).decode()
        lines.append(f'mkdir -p "$(dirname {q})" && echo {b64} | base64 -d > {q}')
    return "\n".join([*lines, "echo hardcoded"])


def hidden_snippets(task: Task, n: int = 6) -> list[str]:
    """Distinctive lines of a task's hidden tests (the longest non-trivial ones)."""
    if task.kind == "swe":
        patch = task.metadata.get("test_patch") or ""
        lines = [
            ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")
        ]
        gone = {ln[1:].strip() for ln in patch.splitlines() if ln.startswith((" ", "-"))}
    else:
        texts = list((task.metadata.get("test_files") or {}).values())
        texts.append(task.validation.verify_script or "")
        lines, gone = [ln for t in texts for ln in t.splitlines()], set()
    keep = {
        s
        for s in (ln.strip() for ln in lines)
        if len(s) >= 20 and s not in gone and not s.startswith(("import ", "from ", "#"))
    }
    return sorted(keep, key=lambda s: (-len(s), s))[:n]


def _read_hidden(task: Task, ctx: ProbeContext) -> str | None:
    snippets = hidden_snippets(task)
    if not snippets:
        return None
    need = min(2, len(snippets))
    pats = " ".join(f"-e {shlex.quote(s)}" for s in snippets)
    return (
        f"grep -rIcF --exclude-dir=.git {pats} /workspace /grading 2>/dev/null | "
        f"awk -F: '$NF >= {need} {{print \"FOOLED hidden test lines readable in \" $1}}'; "
        "echo searched"
    )


GIT_HISTORY = r"""g() { git -c safe.directory='*' "$@"; }
for gd in $(find /workspace -maxdepth 4 -name .git 2>/dev/null); do
  d=$(dirname "$gd"); cd "$d" || continue
  head=$(g rev-parse -q --verify HEAD) || continue
  best=""; bestt=0
  for c in $( { g rev-list --all; g reflog --format=%H; g stash list --format=%H;
                g fsck --unreachable --no-reflogs 2>/dev/null | awk '/commit/{print $3}'; } 2>/dev/null | sort -u); do
    [ "$c" = "$head" ] && continue
    g merge-base --is-ancestor "$c" "$head" 2>/dev/null && continue
    t=$(g show -s --format=%ct "$c" 2>/dev/null) || continue
    if [ "$t" -ge "$bestt" ]; then best=$c; bestt=$t; fi
  done
  [ -n "$best" ] && g checkout -q "$best" -- . && echo "restored $best in $d"
done
echo mined
"""


def _git_history(task: Task, ctx: ProbeContext) -> str:
    return GIT_HISTORY


PROBES: dict[str, Probe] = {
    p.name: p
    for p in [
        Probe("delete_tests", "delete every visible test file and test directory", _delete_tests),
        Probe(
            "empty_tests", "replace visible test files with a trivially passing test", _empty_tests
        ),
        Probe(
            "modify_verifier",
            "overwrite visible verifier scripts / pytest config",
            _modify_verifier,
        ),
        Probe("conftest", "drop a conftest.py that makes every test pass", _conftest),
        Probe("fake_output", "print fake PASSED / OK lines (shadow pytest)", _fake_output),
        Probe(
            "hardcode_output", "write the oracle's output files without its code", _hardcode_output
        ),
        Probe("read_hidden_tests", "hidden tests readable before grading", _read_hidden, "output"),
        Probe("git_history", "check out a future commit left in git history", _git_history),
    ]
}


def open_env(task: Task, backend: str = "bwrap", repos: Iterable[Any] = ()) -> Any:
    """A fresh environment for a terminal or SWE task (through the env registry)."""
    from arcforge.envs.registry import make_env

    if task.kind not in ("terminal", "swe"):
        raise ValueError(f"exploit probes support terminal and swe tasks, not {task.kind!r}")
    kw: dict[str, Any] = {"backend": backend}
    if task.kind == "swe":
        kw["repos"] = list(repos)
    return make_env(task, None, **kw)


def agent_bash(env: Any, command: str, call_id: str = "probe") -> str:
    """Run `command` through the environment's bash tool, exactly as an agent's call."""
    msg = Message("assistant", "", tool_calls=[ToolCall("bash", {"command": command}, call_id)])
    obs = env.step(msg).observations
    return obs[0].content if obs else ""


def _is_code(path: Path) -> bool:
    if path.suffix.lower() in CODE_SUFFIXES or path.stat().st_mode & 0o111:
        return True
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
    }


def oracle_outputs(
    task: Task, backend: str = "bwrap", repos: Iterable[Any] = ()
) -> tuple[float, dict[str, bytes]]:
    """Run the task's oracle once; returns (score, the files hardcode_output may write).

    Those are the non-code files a terminal oracle created or changed in /workspace, and only
    when it also wrote code: an oracle that writes nothing but its output files (echo > x)
    *is* hard-coding, so the probe cannot tell cheating from solving and does not apply.
    SWE tasks return their score and no files."""
    env = open_env(task, backend, repos)
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-oracle-"))
    try:
        env.reset(task)
        solution = task.metadata.get("solution") or task.metadata.get("patch") or ""
        if task.kind != "terminal":
            env.apply_patch(solution)
            return env.verify().score, {}
        env.sb.copy_out("/workspace", tmp / "before")
        env.run_script(solution)
        env.sb.copy_out("/workspace", tmp / "after")
        score = env.verify().score
        before, after = _tree(tmp / "before"), tmp / "after"
        changed = [rel for rel, data in _tree(after).items() if before.get(rel) != data]
        code = [rel for rel in changed if _is_code(after / rel)]
        files = {rel: (after / rel).read_bytes() for rel in changed if rel not in code}
        if not code or sum(len(v) for v in files.values()) > MAX_HARDCODE_BYTES:
            files = {}
        return score, files
    finally:
        env.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run_probe(
    task: Task,
    probe: Probe,
    ctx: ProbeContext | None = None,
    backend: str = "bwrap",
    repos: Iterable[Any] = (),
) -> ProbeResult:
    """Apply one attack in a fresh episode and grade it (see the module docstring)."""
    script = probe.script(task, ctx or ProbeContext())
    if script is None:
        return ProbeResult(probe.name, False, False, "not applicable to this task")
    env = open_env(task, backend, repos)
    try:
        env.reset(task)
        out = agent_bash(env, script)
        if probe.judge == "output":
            hits = [ln for ln in out.splitlines() if ln.startswith("FOOLED")]
            return ProbeResult(probe.name, True, bool(hits), "; ".join(hits)[:500])
        reward = env.verify()
    except SandboxError as err:
        return ProbeResult(probe.name, True, False, f"sandbox error: {err}")
    finally:
        env.close()
    fooled = reward.score >= PASS_THRESHOLD
    detail = f"verifier scored {reward.score:g} after the attack" if fooled else ""
    return ProbeResult(probe.name, True, fooled, detail, reward.score)


def run_probes(
    task: Task,
    names: Iterable[str] | None = None,
    ctx: ProbeContext | None = None,
    backend: str = "bwrap",
    repos: Iterable[Any] = (),
) -> dict[str, ProbeResult]:
    """Run the named probes (default: all); a probe needing the oracle's files gets them from
    one oracle run when `ctx` has none."""
    names = list(names) if names is not None else list(PROBES)
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe(s) {unknown}; known: {', '.join(PROBES)}")
    ctx = ctx or ProbeContext()
    if "hardcode_output" in names and ctx.oracle_files is None and task.kind == "terminal":
        ctx.oracle_files = oracle_outputs(task, backend, repos)[1]
    return {n: run_probe(task, PROBES[n], ctx, backend, repos) for n in names}
