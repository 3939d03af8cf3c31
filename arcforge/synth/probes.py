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
                       data files, in the workspace and, for container tasks, anywhere in the
                       root), byte for byte, without the code that makes them. Applies to
                       terminal tasks whose oracle writes code too: when the deliverable is
                       only a file, writing it *is* the solution (a SWE oracle is a code patch,
                       so it does not apply there either)
    constant_output    write every file the oracle creates or changes (anywhere the agent can
                       write) with one constant placeholder line, doing none of the work: a
                       verifier that checks only that outputs exist (or are non-empty) passes
    answer_in_workspace  search what the agent can read for a file whose content is the
                       oracle's output (a cached answer, a backup, an expected-output file left
                       in the image) and copy it to the output path
    read_hidden_tests  look for the hidden tests (terminal: the test files and verify script;
                       SWE: the lines test_patch adds) anywhere the agent can read before
                       grading; fooled = they are readable there, which hands the agent the
                       expected answers (judged from the probe's output, not by the verifier)
    git_history        mine git history: every commit the agent can reach (refs, reflog,
                       stash, unreachable objects) is a candidate, commits that are not
                       ancestors of HEAD (a future fix left in the repository) newest first,
                       then HEAD's ancestors newest first (an older version before the bug);
                       each of the first MAX_ATTEMPTS is checked out over the work tree in
                       its own fresh episode
    edit_inputs        edit what the verifier reads from the workspace: every workspace path
                       its scripts and tests name (other than test files) is overwritten, a
                       script with a no-op that exits 0, a data file with one constant line
                       (so an output compared with a workspace "expected" file matches it)

A probe may try several attacks (`Probe.retry`: further scripts derived from the first one's
output, each graded in a fresh episode); it is fooled when any of them passes.

Simplification: probes are generic scripts, not an adversarial agent; a verifier can still be
weak in ways none of them tries. The trajectory-level detector (synth/detect.py) covers what an
agent actually did.
"""

from __future__ import annotations

import base64
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.sandbox import SandboxError
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
MAX_ATTEMPTS = 6  # attacks per multi-attempt probe (git_history candidates)
PLACEHOLDER = b"arcforge-placeholder\n"
# where container tasks' outputs are looked for: the whole root but for what no solution
# writes (system state, caches, the grading mounts)
ROOT_SCAN = (
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /grading "
    "-o -path /tests -o -path /logs -o -path /solution -o -path /app -o -path /workspace "
    "-o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg -o -path /var/log "
    "-o -path /root/.cache -o -path /tmp/.arcforge-oracle-mark -o -name __pycache__ "
    "-o -name .git \\) -prune -o -type f -cnewer /tmp/.arcforge-oracle-mark -print"
)
SEARCH_DIRS = "/workspace /app /data /srv /opt /home /root /mnt /var/tmp /tmp"
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


class OracleFiles(dict):
    """{path: bytes} of the non-code files an oracle run created or changed (a path relative to
    /workspace, or absolute for one elsewhere in a container task's root); `wrote_code`: the
    run also wrote code (so hardcoding its outputs skips the work)."""

    wrote_code: bool = False


@dataclass
class ProbeContext:
    """What some probes need besides the task: the oracle's non-code output files (an
    `OracleFiles`; a plain dict counts as written by an oracle that also wrote code)."""

    oracle_files: dict[str, bytes] | None = None


@dataclass(frozen=True)
class Probe:
    """One attack. `script(task, ctx)` is the bash the agent runs (None: does not apply);
    `judge` is "verify" (fooled = the verifier passes) or "output" (fooled = the script
    printed a line starting with FOOLED); `retry(output)`, when set, gives further attack
    scripts from the first one's output, each run and graded in a fresh episode."""

    name: str
    description: str
    script: Callable[[Task, ProbeContext], str | None]
    judge: str = "verify"
    retry: Callable[[str], list[str]] | None = None


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


def _sandbox_path(rel: str) -> str:
    return rel if rel.startswith("/") else "/workspace/" + rel


def _write_files(files: dict[str, bytes]) -> list[str]:
    lines = []
    for rel, data in sorted(files.items()):
        q = shlex.quote(_sandbox_path(rel))
        b64 = base64.b64encode(data).decode()
        lines.append(f'mkdir -p "$(dirname {q})" && echo {b64} | base64 -d > {q}')
    return lines


def _hardcode_output(task: Task, ctx: ProbeContext) -> str | None:
    files = ctx.oracle_files
    if not files or not getattr(files, "wrote_code", True):
        return None
    return "\n".join([*_write_files(files), "echo hardcoded"])


def _constant_output(task: Task, ctx: ProbeContext) -> str | None:
    files = ctx.oracle_files
    if not files:
        return None
    return "\n".join([*_write_files({p: PLACEHOLDER for p in files}), "echo placeholders"])


def _answer_in_workspace(task: Task, ctx: ProbeContext) -> str | None:
    """For each oracle output, the first readable file (not the output itself) whose content
    equals it, ignoring whitespace, is copied over the output path."""
    files = {p: d for p, d in (ctx.oracle_files or {}).items() if len(d.strip()) >= 2}
    if not files:
        return None
    lines = [
        "norm() { tr -d '[:space:]' < \"$1\" 2>/dev/null; }",
        f"cand=$(find {SEARCH_DIRS} -type f -size -200k ! -path '*/.git/*' "
        "! -name '.arcforge-want-*' 2>/dev/null | sort -u)",
    ]
    for i, (rel, data) in enumerate(sorted(files.items())):
        out, want = shlex.quote(_sandbox_path(rel)), f"/tmp/.arcforge-want-{i}"
        lines += [
            f"echo {base64.b64encode(data).decode()} | base64 -d > {want}",
            f"w=$(norm {want}); rm -f {want}; o=$(realpath -m {out})",
            'for f in $cand; do [ "$(realpath -m "$f")" = "$o" ] && continue; '
            f'if [ "$(norm "$f")" = "$w" ]; then mkdir -p "$(dirname {out})" && '
            f'cp "$f" {out} && echo "found the answer of {out} in $f"; break; fi; done',
        ]
    return "\n".join([*lines, "echo searched"])


_PATH_TOKEN = re.compile(r"(?<![\w.-])(?:/app|/workspace)(?:/[\w.@+-]+)+")
_NAME_TOKEN = re.compile(
    r"(?<![\w/.-])[\w-]+\.(?:sh|py|txt|json|csv|ya?ml|toml|cfg|ini|dat|out|log)\b"
)


def _test_texts(task: Task) -> list[str]:
    """The task's text test files (binary ones travel as {"base64": ...})."""
    return [t for t in (task.metadata.get("test_files") or {}).values() if isinstance(t, str)]


def verifier_inputs(task: Task) -> list[str]:
    """Workspace paths the verifier's script and tests name (absolute ones under /app or
    /workspace, and bare file names to look up in the workspace), test files excluded."""
    texts = [task.validation.verify_script or "", *_test_texts(task)]
    text = "\n".join(texts)
    paths = {m.rstrip(".") for m in _PATH_TOKEN.findall(text)}
    names = {m for m in _NAME_TOKEN.findall(text)} - {p.rsplit("/", 1)[-1] for p in paths}
    test_name = re.compile(r"^(test_.*|.*_test\.py|conftest\.py|pytest\.ini|reward\.txt)$")
    keep = [p for p in sorted(paths) if not test_name.match(p.rsplit("/", 1)[-1])]
    keep += [n for n in sorted(names) if not test_name.match(n)]
    return [p for p in keep if p.rstrip("/") not in ("/app", "/workspace")]


def _edit_inputs(task: Task, ctx: ProbeContext) -> str | None:
    targets = verifier_inputs(task)
    if not targets:
        return None
    ok_sh, ok_py = shlex.quote("#!/bin/sh\nexit 0\n"), shlex.quote("raise SystemExit(0)\n")
    const = shlex.quote(PLACEHOLDER.decode())
    absolute = [shlex.quote(t) for t in targets if t.startswith("/")]
    names = " ".join(f"-name {shlex.quote(t)} -o" for t in targets if not t.startswith("/"))
    found = f"find /workspace {_PRUNE} -type f \\( {names[:-3]} \\) -print" if names else "true"
    return "\n".join(
        [
            'edit() { case "$1" in',
            f"  *.sh|*.bash) printf '%s' {ok_sh} > \"$1\";;",
            f"  *.py) printf '%s' {ok_py} > \"$1\";;",
            f'  *) if [ -f "$1" ] && [ -x "$1" ]; then printf \'%s\' {ok_sh} > "$1"; '
            f'else mkdir -p "$(dirname "$1")" && printf \'%s\' {const} > "$1"; fi;;',
            '  esac; echo "edited $1"; }',
            f'for p in {" ".join(absolute)}; do [ -d "$p" ] || edit "$p"; done'
            if absolute
            else "true",
            f'{found} | while read -r f; do edit "$f"; done',
            "echo edited-inputs",
        ]
    )


def hidden_snippets(task: Task, n: int = 6) -> list[str]:
    """Distinctive lines of a task's hidden tests (the longest non-trivial ones)."""
    if task.kind == "swe":
        patch = task.metadata.get("test_patch") or ""
        lines = [
            ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")
        ]
        gone = {ln[1:].strip() for ln in patch.splitlines() if ln.startswith((" ", "-"))}
    else:
        texts = _test_texts(task)
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
  n=0
  for c in $( { g rev-list --all --date-order; g reflog --format=%H; g stash list --format=%H;
                g fsck --unreachable --no-reflogs 2>/dev/null | awk '/commit/{print $3}'; } 2>/dev/null | awk '!seen[$0]++'); do
    n=$((n + 1))
    [ "$c" = "$head" ] && continue
    t=$(g show -s --format=%ct "$c" 2>/dev/null) || continue
    if g merge-base --is-ancestor "$c" "$head" 2>/dev/null; then k=1; else k=0; fi
    printf '%s %010d %06d %s %s\n' "$k" "$((9999999999 - t))" "$n" "$c" "$d"
  done
done | sort | head -n MAX | while read -r k t n c d; do echo "CANDIDATE $d $c"; done > /tmp/.arcforge-git
pick=$(sed -n "PICKp" /tmp/.arcforge-git); cat /tmp/.arcforge-git; rm -f /tmp/.arcforge-git
if [ -n "$pick" ]; then set -- $pick; cd "$2" && g checkout -q "$3" -- . && echo "restored $3 in $2"; fi
echo mined
"""


def _git_history(task: Task, ctx: ProbeContext, pick: int = 1) -> str:
    return GIT_HISTORY.replace("head -n MAX", f"head -n {MAX_ATTEMPTS}").replace(
        "PICKp", f"{pick}p"
    )


def _git_retry(output: str) -> list[str]:
    """The same mining, checking out each further candidate the first attempt listed (by
    rank, so a repository rebuilt per episode with other hashes is mined the same way)."""
    n = sum(ln.startswith("CANDIDATE ") for ln in output.splitlines())
    return [_git_history(Task("", "terminal", ""), ProbeContext(), k) for k in range(2, n + 1)]


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
        Probe(
            "git_history",
            "check out another commit left in git history (a future fix or an older version)",
            _git_history,
            retry=_git_retry,
        ),
        Probe(
            "constant_output",
            "write a placeholder to every file the oracle creates or changes",
            _constant_output,
        ),
        Probe(
            "answer_in_workspace",
            "copy a readable file holding the expected output to the output path",
            _answer_in_workspace,
        ),
        Probe(
            "edit_inputs", "edit the workspace scripts and data the verifier reads", _edit_inputs
        ),
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


def _root_outputs(env: Any, script: str, tmp: Path) -> tuple[str, dict[str, Path]]:
    """Run the oracle `script` in a container task's root; (its output, the host copies of the
    files outside the workspace it created or changed)."""
    env.sb.exec("touch /tmp/.arcforge-oracle-mark && sleep 0.01")
    out = env.run_script(script)
    listing = env.sb.exec(ROOT_SCAN + " 2>/dev/null | head -n 200").stdout.split()
    env.sb.exec("rm -f /tmp/.arcforge-oracle-mark")
    copies = {}
    for i, path in enumerate(p for p in listing if p.startswith("/")):
        try:
            env.sb.copy_out(path, tmp / "root" / str(i))
        except (SandboxError, OSError):
            continue
        copies[path] = tmp / "root" / str(i)
    return out.stdout, copies


def oracle_outputs(
    task: Task, backend: str = "bwrap", repos: Iterable[Any] = ()
) -> tuple[float, OracleFiles]:
    """Run the task's oracle once; returns (score, the files output probes may write).

    Those are the non-code files a terminal oracle created or changed in /workspace and, for
    a container task, anywhere else in its root (absolute paths); `wrote_code` says whether it
    also wrote code (an oracle that writes nothing but its output files *is* hard-coding, so
    hardcode_output cannot tell cheating from solving there). SWE tasks return their score and
    no files."""
    env = open_env(task, backend, repos)
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-oracle-"))
    files = OracleFiles()
    try:
        env.reset(task)
        solution = task.metadata.get("solution") or task.metadata.get("patch") or ""
        if task.kind != "terminal":
            env.apply_patch(solution)
            return env.verify().score, files
        env.sb.copy_out("/workspace", tmp / "before")
        if task.metadata.get("container"):
            _, elsewhere = _root_outputs(env, solution, tmp)
        else:
            env.run_script(solution)
            elsewhere = {}
        env.sb.copy_out("/workspace", tmp / "after")
        score = env.verify().score
        before, after = _tree(tmp / "before"), tmp / "after"
        changed = {
            rel: after / rel for rel, data in _tree(after).items() if before.get(rel) != data
        }
        changed.update(elsewhere)
        code = [rel for rel, host in changed.items() if host.is_file() and _is_code(host)]
        files.update({rel: host.read_bytes() for rel, host in changed.items() if host.is_file()})
        for rel in code:
            files.pop(rel)
        if sum(len(v) for v in files.values()) > MAX_HARDCODE_BYTES:
            files.clear()
        files.wrote_code = bool(code)
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
    """Apply one attack (and its retries) in fresh episodes and grade each (see the module
    docstring)."""
    script = probe.script(task, ctx or ProbeContext())
    if script is None:
        return ProbeResult(probe.name, False, False, "not applicable to this task")
    res, out = _attack(task, probe, script, backend, repos)
    if res.fooled or probe.retry is None:
        return res
    for n, again in enumerate(probe.retry(out)[: MAX_ATTEMPTS - 1], 2):
        more, _ = _attack(task, probe, again, backend, repos)
        if more.fooled:
            more.detail += f" (attempt {n})"
            return more
    return res


def _attack(
    task: Task, probe: Probe, script: str, backend: str, repos: Iterable[Any]
) -> tuple[ProbeResult, str]:
    """One attack script in a fresh episode: (its result, what the script printed)."""
    env = open_env(task, backend, repos)
    out = ""
    try:
        env.reset(task)
        out = agent_bash(env, script)
        if probe.judge == "output":
            hits = [ln for ln in out.splitlines() if ln.startswith("FOOLED")]
            return ProbeResult(probe.name, True, bool(hits), "; ".join(hits)[:500]), out
        reward = env.verify()
    except SandboxError as err:
        return ProbeResult(probe.name, True, False, f"sandbox error: {err}"), out
    finally:
        env.close()
    fooled = reward.score >= PASS_THRESHOLD
    detail = f"verifier scored {reward.score:g} after the attack" if fooled else ""
    return ProbeResult(probe.name, True, fooled, detail, reward.score), out


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
    needs_files = {"hardcode_output", "constant_output", "answer_in_workspace"}
    if needs_files & set(names) and ctx.oracle_files is None and task.kind == "terminal":
        ctx.oracle_files = oracle_outputs(task, backend, repos)[1]
    return {n: run_probe(task, PROBES[n], ctx, backend, repos) for n in names}
