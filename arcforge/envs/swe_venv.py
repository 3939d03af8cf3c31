"""Per-environment Python installs for SWE instances from real repositories.

A real repository's tests need the repository installed (a `src/` layout does not import from
the working directory) and its test dependencies (e.g. `freezegun`, `pytest-asyncio`). As
SWE-bench does, one environment is built per `environment_setup_commit` and install spec, and
reused by every instance that names it:

1. on the host (pip needs the network; the sandbox has none): a clone checked out at the
   environment commit, a virtualenv of the sandbox's own interpreter (/usr/bin/python3), and
   `pip install -e .[test extras] <test requirements> pytest` (`detect_install` reads the
   repository's conventions), or the user's `--install` command with `pip` on PATH;
2. the editable install's path hooks (`*.pth`, setuptools' `__editable__` finders) are
   rewritten from the host clone to /workspace, so inside the sandbox the package imports
   from the workspace under test exactly as `pip install -e .` in SWE-bench's /testbed does;
3. the virtualenv's site-packages is bound read-only at /opt/pysite; a pytest plugin module
   written there (`-p _arcforge_swe_site` via PYTEST_ADDOPTS) processes its `.pth` files, since
   the grading runner starts Python isolated. Plugin autoloading stays on: the repository's
   declared pytest plugins are part of its test setup. A repository that pytest itself
   imports (pluggy, iniconfig, pytest) gets its top-level package linked into site-packages
   instead, since it must import before any plugin runs.

Builds are cached under `$ARCFORGE_SWE_ENVS` (default: a world-readable directory in the system
temp dir, since the sandbox runs as an unprivileged uid), keyed by commit, spec and Python;
a failed build is cached with pip's output and reported again without retrying (`rebuild=True`
retries). Simplifications: setup.py extras are read from its text, not by running it; tox
deps only from plain `deps =` lines; nox sessions are not read.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.envs.swe_env import _GIT_ENV
from arcforge.sandbox import Limits, Sandbox, open_sandbox
from arcforge.sandbox.types import WORKSPACE

PYSITE = "/opt/pysite"  # where the environment's site-packages appears inside the sandbox
PLUGIN = "_arcforge_swe_site"
SANDBOX_PYTHON = "/usr/bin/python3"
TEST_EXTRAS = ("test", "tests", "testing")
BUILD_VERSION = 3  # part of the cache key: bumped when detection or the build steps change
_REQ_FILES = (
    "requirements-test*.txt",
    "requirements_test*.txt",
    "requirements-tests*.txt",
    "test-requirements*.txt",
    "test_requirements*.txt",
    "requirements/test*.txt",
    "requirements/tests*.txt",
)
_PLUGIN_SRC = '''"""Makes this site-packages a site dir (its .pth files run) inside SWE sandboxes."""

import os
import site

site.addsitedir(os.path.dirname(os.path.abspath(__file__)))
'''
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


class EnvBuildError(RuntimeError):
    """The environment could not be installed; `log` holds the installer's output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class InstallSpec:
    """How an environment is installed.

    Attributes:
        cmd: a shell command run in the clone with the environment's `pip` on PATH (replaces
            the detected install); empty: detect from the repository (`detect_install`).
        test_deps: extra requirements installed after it (e.g. "freezegun").
        enabled: False: no install at all; tests run on the host's pytest and /workspace.
    """

    cmd: str = ""
    test_deps: tuple[str, ...] = ()
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"cmd": self.cmd, "test_deps": list(self.test_deps), "enabled": self.enabled}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> InstallSpec:
        d = d or {}
        return cls(
            str(d.get("cmd") or ""), tuple(d.get("test_deps") or ()), bool(d.get("enabled", True))
        )


@dataclass
class RepoEnv:
    """A built environment: `site` is the host site-packages bound at /opt/pysite."""

    key: str
    path: Path
    commit: str
    pip_args: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def site(self) -> Path:
        return next((self.path / "venv" / "lib").glob("python3*/site-packages"))


def swe_limits(timeout: float) -> Limits:
    """The limits of every test run of a real repository, in synthesis and in grading alike:
    4 GiB of data segment (not address space, so thread stacks and arenas fit), 512
    processes/threads, CPU time as long as the wall clock."""
    return Limits(
        wall_time=timeout,
        cpu_seconds=int(timeout),
        memory_mb=4096,
        memory_rlimit="data",
        max_processes=512,
        output_bytes=4_000_000,
    )


def _toml(tree: Path) -> dict[str, Any]:
    p = tree / "pyproject.toml"
    try:
        return tomllib.loads(p.read_text()) if p.is_file() else {}
    except tomllib.TOMLDecodeError:
        return {}


def _group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    """PEP 735 dependency group `name` with its include-group entries resolved."""
    out: list[str] = []
    if name in seen:
        return out
    seen.add(name)
    for item in groups.get(name) or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "include-group" in item:
            out += _group(groups, item["include-group"], seen)
    return out


def _tox_deps(tree: Path) -> list[str]:
    """Plain requirement lines of tox.ini's [testenv] deps (none with substitutions or -r)."""
    p = tree / "tox.ini"
    if not p.is_file():
        return []
    m = re.search(r"^\[testenv\]\s*$(.*?)(?=^\[|\Z)", p.read_text(), re.M | re.S)
    d = re.search(r"^deps\s*=\s*(.*?)(?=^\S|\Z)", m.group(1), re.M | re.S) if m else None
    lines = [ln.strip() for ln in d.group(1).splitlines()] if d else []
    return [ln for ln in lines if ln and not re.search(r"[{}]|^-|^#|:", ln)]


def _setup_extras(tree: Path) -> list[str]:
    """Test extras a setup.py (`extras_require` keys) or setup.cfg (`[options.extras_require]`)
    declares, read from the text without running it."""
    py = (tree / "setup.py").read_text(errors="replace") if (tree / "setup.py").is_file() else ""
    cfg = (tree / "setup.cfg").read_text(errors="replace") if (tree / "setup.cfg").is_file() else ""
    m = re.search(r"^\[options\.extras_require\]\s*$(.*?)(?=^\[|\Z)", cfg, re.M | re.S)
    section = m.group(1) if m else ""
    return [
        e
        for e in TEST_EXTRAS
        if re.search(rf"""['"]{e}['"]\s*:|\b{e}\s*=\s*\[""", py)
        or re.search(rf"^{e}\s*=", section, re.M)
    ]


def _link_pytest_deps(site: Path, src: Path) -> list[str]:
    """Link the top-level packages of an editable install that pytest itself imports (pluggy,
    iniconfig, pytest) into site-packages: they must import before any plugin can run the
    .pth files. Returns the names linked."""
    meta = next(site.glob("pytest-*.dist-info/METADATA"), None)
    reqs = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)", meta.read_text(), re.M) if meta else []
    wanted = {r.lower().replace("-", "_") for r in reqs} | {"pytest", "_pytest"}
    roots = [
        ln.strip()
        for pth in site.glob("*.pth")
        for ln in pth.read_text(errors="replace").splitlines()
        if ln.strip().startswith(WORKSPACE)
    ]
    linked = []
    for root in roots:
        host = src / root[len(WORKSPACE) :].lstrip("/")
        for name in sorted(wanted):
            for entry in (name, f"{name}.py"):
                # lexists: a link made for another .pth line naming the same root dangles here
                if (host / entry).exists() and not os.path.lexists(site / entry):
                    (site / entry).symlink_to(f"{root.rstrip('/')}/{entry}")
                    linked.append(entry)
    return linked


def detect_install(tree: Path) -> tuple[list[str], list[str]]:
    """pip arguments that install the repository at `tree` with its test dependencies.

    Read in order: `[project.optional-dependencies]` test/tests/testing extras (installed as
    `-e .[extra]`), PEP 735 `[dependency-groups]` of those names, requirements files named
    for tests (requirements-test*.txt, test-requirements.txt, requirements/test*.txt), and,
    when none of these exist, tox's `[testenv] deps`. Returns (pip args, sources found)."""
    data = _toml(tree)
    packaged = bool(data.get("project") or data.get("build-system")) or any(
        (tree / f).is_file() for f in ("setup.py", "setup.cfg")
    )
    extras = [
        e for e in TEST_EXTRAS if e in (data.get("project", {}).get("optional-dependencies") or {})
    ] or _setup_extras(tree)
    groups = data.get("dependency-groups") or {}
    reqs = [r for g in TEST_EXTRAS if g in groups for r in _group(groups, g, set())]
    files = sorted(
        {
            p.relative_to(tree).as_posix()
            for pat in _REQ_FILES
            for p in tree.glob(pat)
            if p.is_file()
        }
    )
    sources = [f"extra [{e}]" for e in extras] + [f"group {g}" for g in TEST_EXTRAS if g in groups]
    sources += files
    args: list[str] = []
    if packaged:
        args += ["-e", "." + (f"[{','.join(extras)}]" if extras else "")]
    args += reqs
    for f in files:
        args += ["-r", f]
    if not sources:
        tox = _tox_deps(tree)
        args += tox
        sources += ["tox.ini deps"] if tox else []
    return args, sources


def needs_install(tree: Path, spec: InstallSpec) -> bool:
    """Whether a repository needs an environment (it is packaged, names test requirements, or
    the user gave an install command or test deps)."""
    if not spec.enabled:
        return False
    return bool(spec.cmd or spec.test_deps or detect_install(tree)[0])


def cache_root() -> Path:
    root = Path(
        os.environ.get("ARCFORGE_SWE_ENVS") or Path(tempfile.gettempdir()) / "arcforge-swe-envs"
    )
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    return root


def _python_version() -> str:
    res = subprocess.run(
        [SANDBOX_PYTHON, "-c", "import sys; print(sys.version)"], capture_output=True, text=True
    )
    return res.stdout.strip()


def env_key(commit: str, spec: InstallSpec) -> str:
    blob = json.dumps([commit, spec.to_dict(), _python_version(), BUILD_VERSION], sort_keys=True)
    return f"{commit[:12]}-{hashlib.sha1(blob.encode()).hexdigest()[:10]}"


def _run(
    cmd: list[str] | str, cwd: Path, env: dict[str, str], log: list[str], timeout: float
) -> int:
    shell = isinstance(cmd, str)
    log.append(f"$ {cmd if shell else ' '.join(cmd)}")
    try:
        res = subprocess.run(
            cmd, cwd=cwd, env=env, shell=shell, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        log.append(f"timed out after {timeout:.0f} s")
        return 124
    log.append((res.stdout + res.stderr)[-6000:])
    return res.returncode


def _rewrite_paths(site: Path, src: Path) -> int:
    """Point the editable install's hooks at /workspace instead of the host clone."""
    olds = sorted({str(src), str(src.resolve())}, key=len, reverse=True)
    n = 0
    for p in site.iterdir():
        if not p.is_file() or not (
            p.suffix in (".pth", ".egg-link") or p.name.startswith("__editable__")
        ):
            continue
        text = p.read_text(errors="replace")
        new = text
        for old in olds:
            new = new.replace(old, WORKSPACE)
        if new != text:
            p.write_text(new)
            n += 1
    return n


GENERATED = "generated"  # files the build backend wrote into the tree (see _keep_generated)
SKIP_GENERATED = re.compile(
    r"(^|/)(__pycache__|\.pytest_cache|build|dist|\.eggs|\.tox)(/|$)|\.pyc$"
)


def _keep_generated(src: Path, dest: Path, log: list[str]) -> int:
    """Keep what the editable install's build backend wrote into the source tree that git
    does not track: hatch-vcs / setuptools-scm version files, compiled translations, generated
    modules, .egg-info metadata. SWE-bench installs in place in /testbed, so they sit next to
    the code; `workspace_generated` puts them into each episode's workspace the same way."""
    res = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-files", "--others", "-z"],
        cwd=src,
        capture_output=True,
        text=True,
    )
    n = 0
    for rel in filter(None, res.stdout.split("\0")):
        if SKIP_GENERATED.search(rel) or not (src / rel).is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
        n += 1
    if n:
        log.append(f"kept {n} file(s) the build backend generated in the tree")
    return n


def workspace_generated(env: RepoEnv | None, workspace: Path | None) -> int:
    """Copy the environment's generated files into `workspace` where it lacks them (a file
    the instance tracks is never replaced). Returns how many were copied."""
    if env is None or workspace is None or not (env.path / GENERATED).is_dir():
        return 0
    n = 0
    for f in (env.path / GENERATED).rglob("*"):
        target = workspace / f.relative_to(env.path / GENERATED)
        if f.is_file() and not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            n += 1
    return n


def _install(repo: Path, commit: str, spec: InstallSpec, build: Path, log: list[str]) -> RepoEnv:
    src, venv = build / "src", build / "venv"
    git = ["git", "-c", "safe.directory=*"]
    genv = {**os.environ, **_GIT_ENV}
    if _run(
        [*git, "clone", "-q", "--shared", "--no-checkout", str(repo), str(src)],
        build,
        genv,
        log,
        600,
    ):
        raise EnvBuildError(f"cannot clone {repo}", "\n".join(log))
    if _run([*git, "checkout", "-q", commit], src, genv, log, 600):
        raise EnvBuildError(f"cannot check out {commit[:12]}", "\n".join(log))
    if _run(
        [SANDBOX_PYTHON, "-m", "venv", "--without-pip", str(venv)],
        build,
        dict(os.environ),
        log,
        120,
    ):
        raise EnvBuildError("cannot create a virtualenv", "\n".join(log))
    # `pip` of the environment: the host's pip driving the venv's interpreter
    pip = venv / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\nexec {sys.executable} -m pip --python {venv}/bin/python "$@"\n')
    pip.chmod(0o755)
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("PYTHONPATH", None)
    args, sources = detect_install(src) if not spec.cmd else ([], ["--install"])
    steps: list[list[str] | str] = [spec.cmd] if spec.cmd else []
    if args:
        steps.append([str(pip), "install", "-q", *args])
    steps.append([str(pip), "install", "-q", *spec.test_deps, "pytest"])
    for step in steps:
        if _run(step, src, env, log, 1800):
            raise EnvBuildError("install failed", "\n".join(log))
    out = RepoEnv(build.name, build, commit, args, sources)
    _keep_generated(src, build / GENERATED, log)
    _rewrite_paths(out.site, src)
    _link_pytest_deps(out.site, src)
    (out.site / f"{PLUGIN}.py").write_text(_PLUGIN_SRC)
    (out.site / "sitecustomize.py").write_text(_PLUGIN_SRC)
    shutil.rmtree(src, ignore_errors=True)
    return out


def _lock(key: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def ensure_env(
    repo: str | Path, commit: str, spec: InstallSpec, rebuild: bool = False, retry: bool = False
) -> RepoEnv:
    """The environment of `commit` under `spec`, built on first use (see the module docstring).
    `rebuild`: build again even when cached; `retry`: build again when the cached build failed.

    Raises:
        EnvBuildError: the install failed (now or in a cached earlier build); `.log` has why.
    """
    root = cache_root()
    key = env_key(commit, spec)
    dst, meta = root / key, root / key / "env.json"
    with _lock(key), open(root / f"{key}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        failed = meta.is_file() and json.loads(meta.read_text())["status"] != "ok"
        if dst.exists() and (rebuild or (retry and failed)):
            shutil.rmtree(dst)
        if meta.is_file():
            info = json.loads(meta.read_text())
            if info["status"] != "ok":
                raise EnvBuildError(
                    f"{info['reason']} (cached; rebuild to retry)", info.get("log", "")
                )
            return RepoEnv(key, dst, commit, info.get("pip_args", []), info.get("sources", []))
        build = Path(tempfile.mkdtemp(prefix=f"{key}.build-", dir=root))
        log: list[str] = []
        try:
            env = _install(Path(repo), commit, spec, build, log)
        except EnvBuildError as err:
            dst.mkdir(exist_ok=True)
            meta.write_text(
                json.dumps({"status": "failed", "reason": str(err), "log": err.log[-20000:]})
            )
            shutil.rmtree(build, ignore_errors=True)
            raise
        subprocess.run(["chmod", "-R", "a+rX", str(build)], check=False)
        build.rename(dst)
        info = {
            "status": "ok",
            "commit": commit,
            "spec": spec.to_dict(),
            "pip_args": env.pip_args,
            "sources": env.sources,
            "log": "\n".join(log)[-20000:],
        }
        meta.write_text(json.dumps(info, indent=1))
        dst.chmod(0o755)
        return RepoEnv(key, dst, commit, env.pip_args, env.sources)


def sandbox_env(env: RepoEnv | None) -> tuple[dict[str, str], dict[str, str]]:
    """(read-only binds, environment variables) of a sandbox testing under `env`."""
    from arcforge.sandbox import host_site_packages

    fixed = {"PYTHONPATH": PYSITE}
    if env is None:
        binds = {str(host_site_packages()): PYSITE}
        return binds, {**fixed, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return {str(env.site): PYSITE}, {**fixed, "PYTEST_ADDOPTS": f"-p {PLUGIN}"}


def open_env_sandbox(
    backend: str,
    limits: Limits,
    env: RepoEnv | None,
    workspace: Path | None,
    extra_env: dict[str, str] | None = None,
) -> Sandbox:
    """A sandbox over `workspace` whose Python sees `env` (None: the host's pytest only);
    the files the environment's build backend generated are put into the workspace first."""
    workspace_generated(env, workspace)
    binds, variables = sandbox_env(env)
    return open_sandbox(
        backend,
        workspace=workspace,
        limits=limits,
        extra_ro_binds=binds,
        env={**variables, **(extra_env or {})},
    )


def env_summary(env: RepoEnv | None) -> dict[str, Any]:
    """What an instance records about its environment."""
    if env is None:
        return {"key": None}
    return {"key": env.key, "pip_args": env.pip_args, "sources": env.sources}


__all__ = [
    "EnvBuildError",
    "InstallSpec",
    "RepoEnv",
    "detect_install",
    "ensure_env",
    "env_summary",
    "needs_install",
    "open_env_sandbox",
    "swe_limits",
    "workspace_generated",
]
