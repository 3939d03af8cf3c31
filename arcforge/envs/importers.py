"""Import external tasks as `Task`s: Terminal-Bench and Harbor directories, SWE-bench JSONL.

Terminal-Bench (1): task.yaml (instruction, or descriptions[0].description), Dockerfile,
run-tests.sh, solution.sh, tests/. Harbor (Terminal-Bench 2): task.toml, instruction.md,
environment/Dockerfile, tests/test.sh (+ files), solution/solve.sh; the verdict is the number
test.sh writes to /logs/verifier/reward.txt. An optional environment/init.sh (what arcforge's
terminal synthesis writes instead of a Dockerfile) runs after the Dockerfile replay, in the
sandbox, before the agent starts.

These tasks expect a container: cwd /app, tests in /tests, logs in /logs. Our bwrap sandbox
gives /workspace (writable) and /grading (writable only to the grader), so every script and test
file is rewritten at import: /app -> /workspace, /tests -> /grading/tests (also $TEST_DIR),
/logs -> /grading/logs. The Dockerfile is replayed where possible: WORKDIR /app, ENV (kept for
every exec), COPY/ADD of build-context files (written into the workspace) and RUN lines (run
as the init script). Network installs cannot happen at solve time: `apt-get install` of
packages already on this host and `pip install` of packages importable from the bound host
site-packages are dropped as satisfied; anything else marks the task unsupported, naming the
reason (metadata["unsupported"]; environments refuse such tasks). The verifiers' pytest
bootstrap (curl uv | sh, uv venv, uv pip install pytest, uvx ... pytest) is replaced by the
sandbox's pytest. Simplification: RUN chains are split on `&&` only.

Container mode (the default for a task with a Dockerfile; `container=False` gives the rewrite
mode above): nothing is rewritten. Where the host can build real roots (the default, see
`root_mode`), the Dockerfile becomes a real Debian root (rootfs_build.py: RUN replayed as root,
so apt-get, /usr/share, /data, /server all work; episodes on a copy-on-write view; context
["rootfs_image"]); the verifier's own `apt-get install`s and `pip install`s (outside the pytest
bootstrap) are hoisted into that build, since no sandbox has a network at solve time. Elsewhere,
or with $ARCFORGE_TASK_ROOT=layer, it becomes a cached system layer over the host's /usr
(arcforge.sandbox.root; context["root_layer"]): uid 0, cwd the WORKDIR, writable /etc, /usr/local and
/root, pip packages in the layer's venv, apt packages only when the host has them. Either way
/tests and /logs are where the scripts expect them, and needs that cannot be built here
(services, GPUs, QEMU, a base image with no Debian stand-in, a failing RUN) mark the task
unsupported, naming every reason.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import yaml

from arcforge.sandbox.root import (
    DROP_SEGMENT,
    STOCK_IMAGES,
    apt_missing,
    apt_packages,
    build_layer,
    logical_lines,
    pip_missing,
)
from arcforge.sandbox.rootfs import rootfs_blockers
from arcforge.sandbox.rootfs_build import build_image
from arcforge.types import Task, Validation
from arcforge.world.code.pysource import SWE_TOOLS

TERMINAL_TOOLS = ["bash", "view_file", "edit_file"]
PATH_MAP = (("/app", "/workspace"), ("/tests", "/grading/tests"), ("/logs", "/grading/logs"))
DIFFICULTY = {"easy": 0.25, "medium": 0.5, "hard": 0.75}
# what every task sandbox already has (pytest from the bound host site-packages; the ctrf
# report plugin's flag is stripped): a verifier's install of these is dropped, not hoisted
PROVIDED = {"pytest", "pytest-json-ctrf", "pluggy", "iniconfig", "packaging"}
ROOT_MODES = ("auto", "layer", "rootfs")
TB1_HELPERS = {"setup-uv-pytest.sh", "run-uv-pytest.sh"}  # sourced by run-tests.sh from tests/
# what Terminal-Bench 1 runs for a task that ships no run-tests.sh: pytest on its test outputs
TB1_DEFAULT_RUN_TESTS = "#!/bin/bash\npytest $TEST_DIR/test_outputs.py -rA\n"


def _pkg_name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ]", spec)[0].lower().replace("_", "-")


class Import:
    """Accumulates the Dockerfile replay and the reasons a task cannot run here."""

    def __init__(self) -> None:
        self.init: list[str] = []
        self.files: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.unsupported: list[str] = []
        self.hoist_pip: list[str] = []  # container mode: the verifier's pip installs
        self.hoist_apt: list[str] = []  # real roots: the verifier's apt installs
        self.solve_time = False  # classifying a test script rather than a Dockerfile RUN
        self.container = False
        self.real_root = False  # container mode on a real Debian root (see `uses_real_root`)


def rewrite_paths(text: str) -> str:
    """Map container paths (/app, /tests, /logs) to the sandbox's (see the module header)."""
    for old, new in PATH_MAP:
        text = re.sub(rf"(?<![\w.$/-]){re.escape(old)}(?![\w.-])", new, text)
    return text


def _install(seg: str, imp: Import) -> bool:
    """Handle an install command; True when it was recognised (and dropped or rejected)."""
    pkgs = apt_packages(seg)
    if pkgs is not None:
        if imp.real_root and imp.solve_time:  # installed by the image build instead
            imp.hoist_apt += [p for p in pkgs if p not in imp.hoist_apt]
        elif missing := apt_missing(pkgs):
            imp.unsupported.append(f"apt package(s) not on this host: {', '.join(missing)}")
        return True
    pip = re.match(r"^(?:uv\s+add|(?:python3?\s+-m\s+)?(?:uv\s+)?pip3?\s+install)\s+(.*)$", seg)
    if pip:
        pkgs = [w for w in pip.group(1).split() if not w.startswith("-")]
        if imp.container and imp.solve_time:  # built into the layer's venv instead
            extra = [p for p in pkgs if _pkg_name(p) not in PROVIDED and p not in imp.hoist_pip]
            imp.hoist_pip += extra
        elif missing := pip_missing(pkgs):
            imp.unsupported.append(f"pip package(s) not available offline: {', '.join(missing)}")
        return True
    if re.match(r"^(curl|wget)\s", seg) or seg.startswith("git clone"):
        when = "downloads at solve time" if imp.solve_time else "network access at build time"
        imp.unsupported.append(f"{when}: {seg[:80]}")
        return True
    return False


def replay_run(cmd: str, imp: Import) -> str | None:
    """A RUN (or script) line with installs handled; None when nothing is left to run."""
    keep = []
    for seg in (s.strip() for s in cmd.split("&&")):
        if not seg or DROP_SEGMENT.match(seg) or _install(seg, imp):
            continue
        keep.append(seg)
    return " && ".join(keep) or None


def replay_dockerfile(path: Path, imp: Import) -> None:
    """Turn a Dockerfile into init lines, files and env (the module header lists the rules)."""
    context, workdir = path.parent, "/workspace"
    for line in logical_lines(path.read_text()):
        op, _, arg = line.partition(" ")
        op, arg = op.upper(), arg.strip()
        if op == "FROM":
            image = arg.split()[0]
            if not STOCK_IMAGES.match(image):
                imp.unsupported.append(f"base image {image} is not a stock Debian/Python image")
        elif op == "WORKDIR":
            workdir = rewrite_paths(arg if arg.startswith("/") else f"{workdir}/{arg}")
            if workdir != "/workspace" and not workdir.startswith("/workspace/"):
                imp.unsupported.append(f"WORKDIR {arg} is outside /app")
            imp.init.append(f"mkdir -p {workdir} && cd {workdir}")
        elif op == "ENV":
            pairs = (
                re.findall(r'(\w+)=("[^"]*"|\S+)', arg)
                if "=" in arg.split()[0]
                else [tuple(arg.split(None, 1))]
            )
            for k, v in pairs:
                imp.env[k] = rewrite_paths(v.strip('"'))
                imp.init.append(f"export {k}={json.dumps(imp.env[k])}")
        elif op in ("COPY", "ADD"):
            _copy(context, workdir, [a for a in arg.split() if not a.startswith("--")], imp)
        elif op == "RUN":
            if (kept := replay_run(rewrite_paths(arg), imp)) is not None:
                imp.init.append(kept)
        elif op == "USER" and arg not in ("root", "0"):
            imp.unsupported.append(f"USER {arg}: only the sandbox user exists")


def _copy(context: Path, workdir: str, args: list[str], imp: Import) -> None:
    *srcs, dst = args
    dst = rewrite_paths(dst if dst.startswith("/") else f"{workdir}/{dst}")
    if not dst.startswith("/workspace"):
        imp.unsupported.append(f"COPY to {dst} is outside /app")
        return
    for src in srcs:
        p = context / src
        if src.startswith(("http://", "https://")) or not p.exists():
            imp.unsupported.append(f"COPY source {src} is not in the build context")
            continue
        items = [(f, f.relative_to(p).as_posix()) for f in p.rglob("*") if f.is_file()]
        if p.is_file():
            to_dir = dst.endswith("/") or len(srcs) > 1
            items = [(p, p.name if to_dir else "")]
        for f, rel in items:
            target = f"{dst.rstrip('/')}/{rel}" if rel else dst
            imp.files[target.removeprefix("/workspace").lstrip("/")] = rewrite_paths(f.read_text())


def adapt_test_script(text: str, imp: Import) -> str:
    """Replace the pytest bootstrap of a run-tests.sh / test.sh with the sandbox's pytest."""
    out = []
    imp.solve_time = True
    text = text if imp.container else rewrite_paths(text)
    for line in text.replace("\\\n", " ").splitlines():
        s = line.strip()
        # -P: like the `pytest` entry point, keep the cwd (/workspace) off sys.path, so a
        # workspace pytest.py cannot stand in for pytest (the fake_output exploit probe)
        if uvx := re.match(r"^uvx\s+(.*?)\bpytest\s+", s):  # `--with X`: X installed at build
            words = uvx.group(1).split()
            pkgs = [b for a, b in zip(words, words[1:]) if a in ("--with", "-w")]
            pkgs += [w.split("=", 1)[1] for w in words if w.startswith("--with=")]
            if pkgs:
                _install("pip install " + " ".join(pkgs), imp)
        s = re.sub(r"^uvx\s+(.*?)\bpytest\s+", "python3 -P -m pytest ", s)
        s = re.sub(r"^(uv\s+run\s+|python3?\s+-m\s+)?pytest\s", "python3 -P -m pytest ", s)
        # the ctrf report plugin is not loaded (the sandbox's pytest autoloads no plugins)
        s = re.sub(r"\s--ctrf(\s+|=)\S+", "", s)
        if s and not s.startswith("#") and replay_run(s, imp) is None:
            continue
        out.append(s if s.startswith("python3 -P -m pytest") or "--ctrf" in line else line)
    return "\n".join(out) + "\n"


def _read_tests(tests: Path, skip: set[str], imp: Import) -> dict[str, Any]:
    """The test files; Terminal-Bench 1's helper scripts adapted as run-tests.sh is (their
    `uv add`s are installed at build time, their pytest is the sandbox's). A binary file (held-out
    data) travels as {"base64": ...}, since Task metadata is JSON."""
    if not tests.is_dir():
        return {}
    fix = (lambda t: t) if imp.container else rewrite_paths
    files = {
        f.relative_to(tests).as_posix(): f
        for f in sorted(tests.rglob("*"))
        if f.is_file() and f.name not in skip
    }
    binary = {rel for rel, f in files.items() if not _is_text(f)}
    return {
        rel: {"base64": base64.b64encode(f.read_bytes()).decode()}
        if rel in binary
        else adapt_test_script(f.read_text(), imp)
        if f.name in TB1_HELPERS
        else fix(f.read_text())
        for rel, f in files.items()
    }


def _is_text(path: Path) -> bool:
    try:
        path.read_text()
    except UnicodeDecodeError:
        return False
    return True


def missing_tests(verify: str, tests: dict[str, str], script: str) -> list[str]:
    """A reason for each test file the verify script names under /tests ($TEST_DIR) that the
    task's tests/ directory lacks (a task shipped without its tests cannot be graded)."""
    named = re.findall(
        r"(?:\$TEST_DIR|\$\{TEST_DIR\}|(?<![\w./-])/tests|(?<![\w./-])/grading/tests)"
        r"/([\w./-]+\.py)\b",
        verify,
    )
    return [
        f"{script} runs tests/{rel}, which the task does not ship"
        for rel in sorted(set(named))
        if rel not in tests
    ]


def solution_yaml(path: Path) -> str:
    """Terminal-Bench 1's keystroke oracle (a list of {command, ...} sent to a shell) as one
    script. Simplification: each command is one shell line; interactive keystrokes are not
    replayed."""
    steps = yaml.safe_load(path.read_text()) or []
    if not isinstance(steps, list):
        raise ValueError(f"{path}: expected a list of {{command: ...}} steps")
    return "\n".join(str(s["command"]) if isinstance(s, dict) else str(s) for s in steps) + "\n"


def root_mode() -> str:
    """How container-mode tasks get their root: $ARCFORGE_TASK_ROOT, one of ROOT_MODES."""
    mode = os.environ.get("ARCFORGE_TASK_ROOT", "auto")
    if mode not in ROOT_MODES:
        raise ValueError(f"ARCFORGE_TASK_ROOT={mode!r}: expected one of {', '.join(ROOT_MODES)}")
    return mode


def uses_real_root() -> bool:
    """Whether container-mode tasks get a real Debian root: mode "rootfs", or "auto" on a host
    that can build one; otherwise ("layer", or "auto" without mmdebstrap/root) the host layer."""
    mode = root_mode()
    return mode == "rootfs" or (mode == "auto" and not rootfs_blockers())


def _build_root(dockerfile: Path | None, compose: Path | None, imp: Import) -> dict[str, Any]:
    """Container mode: build (or find cached) the task's root; context entries for it
    (a real root when `imp.real_root`, else a system layer over the host's /usr)."""
    compose_text = compose.read_text() if compose and compose.is_file() else ""
    base = {"dockerfile": str(dockerfile or ""), "extra_pip": list(imp.hoist_pip)}
    if not imp.real_root:
        build = build_layer(dockerfile, extra_pip=imp.hoist_pip, compose=compose_text)
        if build.layer is not None:
            return {"root_layer": str(build.layer.path), **base}
        imp.unsupported += build.unsupported
        if root_mode() == "auto":  # what stands between this host and a real root
            imp.unsupported += [f"a real root would need: {b}" for b in rootfs_blockers()]
        return {}
    image = build_image(
        dockerfile, compose=compose_text, extra_pip=imp.hoist_pip, extra_apt=imp.hoist_apt
    )
    if image.image is None:
        imp.unsupported += image.unsupported
        return {}
    return {
        "rootfs_image": str(image.image.lowers[0].parent),
        **base,
        "extra_apt": list(imp.hoist_apt),
    }


def _task(
    root: Path,
    fmt: str,
    instruction: str,
    imp: Import,
    verify: str,
    solution: str,
    tests: dict[str, str],
    meta: dict[str, Any],
    extra: dict[str, Any],
) -> Task:
    return Task(
        id=f"{fmt}:{root.name}",
        kind="terminal",
        instruction=instruction.strip(),
        context={
            "init_script": "\n".join(["set -e", *imp.init]) if imp.init else "",
            "files": imp.files,
            "env": imp.env,
            **extra,
        },
        tools=list(TERMINAL_TOOLS),
        validation=Validation(verify_script=verify),
        source=f"{fmt}:{root}",
        difficulty=DIFFICULTY.get(str(meta.get("difficulty"))),
        metadata={
            "solution": solution if imp.container else rewrite_paths(solution),
            "test_files": tests,
            "format": fmt,
            "container": imp.container,
            "unsupported": sorted(set(imp.unsupported)),
            **meta,
        },
    )


def import_terminal_bench(root: str | Path, container: bool | None = None) -> Task:
    """A Terminal-Bench task directory -> terminal Task (container mode: see the header;
    default on when the task has a Dockerfile)."""
    root = Path(root)
    spec = yaml.safe_load((root / "task.yaml").read_text()) or {}
    instruction = spec.get("instruction") or (spec.get("descriptions") or [{}])[0].get(
        "description"
    )
    if not instruction:
        raise ValueError(f"{root}/task.yaml has no instruction")
    imp = Import()
    dockerfile = root / "Dockerfile" if (root / "Dockerfile").is_file() else None
    imp.container = dockerfile is not None if container is None else container
    imp.real_root = imp.container and uses_real_root()
    if dockerfile is not None and not imp.container:
        replay_dockerfile(dockerfile, imp)
    run_tests = root / "run-tests.sh"
    verify = adapt_test_script(
        run_tests.read_text() if run_tests.is_file() else TB1_DEFAULT_RUN_TESTS, imp
    )
    tests = _read_tests(root / "tests", set(), imp)  # before the build: helpers hoist installs
    imp.unsupported += missing_tests(verify, tests, "run-tests.sh")
    extra = _build_root(dockerfile, root / "docker-compose.yaml", imp) if imp.container else {}
    sol = (root / "solution.sh").read_text() if (root / "solution.sh").is_file() else ""
    if not sol and (root / "solution.yaml").is_file():
        sol = solution_yaml(root / "solution.yaml")
    meta = {
        "difficulty": spec.get("difficulty"),
        "category": spec.get("category"),
        "tags": spec.get("tags") or [],
        "verify_timeout": spec.get("max_test_timeout_sec"),
        "agent_timeout": spec.get("max_agent_timeout_sec"),
        "parser_name": spec.get("parser_name") or "pytest",
    }
    return _task(root, "terminal-bench", instruction, imp, verify, sol, tests, meta, extra)


def import_harbor(root: str | Path, container: bool | None = None) -> Task:
    """A Harbor task directory -> terminal Task (reward read from /logs/verifier/reward.txt;
    container mode: see the header; default on when environment/Dockerfile exists)."""
    root = Path(root)
    spec = tomllib.loads((root / "task.toml").read_text())
    imp = Import()
    env_dir = root / "environment"
    dockerfile = env_dir / "Dockerfile" if (env_dir / "Dockerfile").is_file() else None
    imp.container = dockerfile is not None if container is None else container
    imp.real_root = imp.container and uses_real_root()
    if dockerfile is not None and not imp.container:
        replay_dockerfile(dockerfile, imp)
    if (env_dir / "init.sh").is_file():  # our addition: setup run before the agent
        init = (env_dir / "init.sh").read_text()
        imp.init.append(init if imp.container else rewrite_paths(init))
    test_sh = root / "tests" / "test.sh"
    if not test_sh.is_file():
        imp.unsupported.append("the task ships no tests/test.sh (Harbor's verifier script)")
    verify = adapt_test_script(test_sh.read_text() if test_sh.is_file() else "", imp)
    tests = _read_tests(root / "tests", {"test.sh"}, imp)  # before the build (see above)
    imp.unsupported += missing_tests(verify, tests, "tests/test.sh")
    compose = env_dir / "docker-compose.yaml"
    extra = _build_root(dockerfile, compose, imp) if imp.container else {}
    md = spec.get("metadata", {})
    meta = {
        "difficulty": md.get("difficulty"),
        "category": md.get("category"),
        "tags": md.get("tags") or [],
        "reward_file": "/grading/logs/verifier/reward.txt",
        "verify_timeout": spec.get("verifier", {}).get("timeout_sec"),
        "agent_timeout": spec.get("agent", {}).get("timeout_sec"),
        **task_resources(spec.get("environment") or {}),
    }
    return _task(
        root,
        "harbor",
        (root / "instruction.md").read_text(),
        imp,
        verify,
        harbor_oracle(root / "solution", imp.container),
        tests,
        meta,
        extra,
    )


def _memory_mb(value: Any) -> int | None:
    """A task's memory field ("4G", "512M", 2048) in MiB."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(value), re.I)
    if not m:
        return None
    scale = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def host_resources() -> tuple[int, int]:
    """(cores, memory MiB) of this machine."""
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError):
        mem = 0
    return len(os.sched_getaffinity(0)), mem


def task_resources(env: dict[str, Any]) -> dict[str, Any]:
    """A Harbor task's [environment] cpus / memory, and a note for each that exceeds this
    machine (the task still runs: most finish on fewer cores, only slower)."""
    cpus = env.get("cpus")
    mem = env.get("memory_mb") or _memory_mb(env.get("memory"))
    cores, host_mem = host_resources()
    notes = []
    if isinstance(cpus, (int, float)) and cpus > cores:
        notes.append(f"the task asks for {cpus:g} cpus; this machine has {cores}")
    if mem and host_mem and mem > host_mem:
        notes.append(f"the task asks for {mem} MiB of memory; this machine has {host_mem} MiB")
    out: dict[str, Any] = {"cpus": cpus, "memory_mb": mem}
    if notes:
        out["resource_notes"] = notes
    return out


def harbor_oracle(sol_dir: Path, container: bool) -> str:
    """The oracle script of a Harbor task: solve.sh, or, when solution/ holds more files (that
    solve.sh reads from /solution, as Harbor mounts it), a script that first writes them there.
    The agent never sees them: they exist only in the oracle's run."""
    solve = sol_dir / "solve.sh"
    if not solve.is_file():
        return ""
    files = sorted(f for f in sol_dir.rglob("*") if f.is_file())
    if not container or files == [solve]:
        return solve.read_text()
    lines = ["set -e", "mkdir -p /solution"]
    for f in files:
        rel = shlex.quote(f"/solution/{f.relative_to(sol_dir).as_posix()}")
        data = base64.b64encode(f.read_bytes()).decode()
        lines += [f"mkdir -p $(dirname {rel})", f"echo {data} | base64 -d > {rel}"]
    return "\n".join([*lines, "set +e", "bash /solution/solve.sh"]) + "\n"


def import_task_dir(root: str | Path, container: bool | None = None) -> Task:
    """Terminal-Bench or Harbor, told apart by task.yaml / task.toml."""
    root = Path(root)
    if (root / "task.toml").is_file():
        return import_harbor(root, container)
    if (root / "task.yaml").is_file():
        return import_terminal_bench(root, container)
    raise ValueError(
        f"{root} is neither a Terminal-Bench (task.yaml) nor a Harbor (task.toml) task directory"
    )


def _id_list(v: Any) -> list[str]:
    return list(json.loads(v) if isinstance(v, str) else v or [])


def swebench_task(rec: dict[str, Any], clone: str | Path) -> Task:
    """One SWE-bench instance record + a local clone of its repository -> swe Task."""
    f2p, p2p = _id_list(rec.get("FAIL_TO_PASS")), _id_list(rec.get("PASS_TO_PASS"))
    unsupported = [f"test id {t!r} is not a pytest node id" for t in f2p + p2p if "::" not in t][:3]
    if not Path(clone, ".git").exists():
        unsupported.append(f"{clone} is not a git clone")
    return Task(
        id=rec["instance_id"],
        kind="swe",
        instruction=rec["problem_statement"],
        context={
            "repo": rec.get("repo", ""),
            "repo_path": str(Path(clone).resolve()),
            "base_commit": rec["base_commit"],
        },
        tools=list(SWE_TOOLS),
        validation=Validation(fail_to_pass=f2p, pass_to_pass=p2p),
        source=f"swe-bench:{rec.get('repo', '')}",
        metadata={
            "patch": rec.get("patch", ""),
            "test_patch": rec.get("test_patch", ""),
            "version": rec.get("version"),
            "unsupported": unsupported,
        },
    )


def import_swebench(jsonl: str | Path, clones: str | Path | dict[str, str]) -> list[Task]:
    """SWE-bench instances from a JSONL file. `clones`: one clone path for every instance, or
    {repo ("owner/name"): clone path}."""
    tasks = []
    for n, line in enumerate(Path(jsonl).read_text().splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        missing = [k for k in ("instance_id", "base_commit", "problem_statement") if k not in rec]
        if missing:
            raise ValueError(f"{jsonl}:{n}: SWE-bench record lacks {', '.join(missing)}")
        clone = clones.get(rec.get("repo", "")) if isinstance(clones, dict) else clones
        if clone is None:
            raise ValueError(f"{jsonl}:{n}: no clone given for repo {rec.get('repo')!r}")
        tasks.append(swebench_task(rec, clone))
    return tasks
