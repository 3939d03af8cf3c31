"""Build and launch a front-end project: identify its type, build it, start it, measure BSR.

The static-verification half of CC-Bench-style front-end evaluation (GLM-5): a project only
reaches the judge agent when it builds and serves. Project types, tried in order:

    node    package.json: `npm run build` when a build script exists (after `npm install
            --offline` when dependencies are declared but node_modules is absent); started with
            `npm start` (or `npm run dev` / `npm run preview`), else its dist/, build/ or public/
            directory is served statically.
    python  app.py, server.py or main.py: `python -m py_compile` on every .py file is the build;
            `python <entry>` is the start, told its port through $PORT (and $HOST).
    static  an index.html at the root (or in dist/, build/, public/): no build; served by
            `python -m http.server` on loopback.

Each project runs from a temporary copy (the given directory is never written) as a local
subprocess in its own process group on a free 127.0.0.1 port, with a time limit per step.
Simplification: build and start are not sandboxed (our bwrap sandbox has no network namespace
sharing, so a server inside it could not be reached from the browser); judge only projects you
would run on this machine. BSR (build success rate) = share of projects that built and served.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from arcforge.errors import UserError

STATIC_DIRS = ("", "dist", "build", "public")
PY_ENTRIES = ("app.py", "server.py", "main.py")


@dataclass
class ProjectSpec:
    """How to build and start one project. `start` None: serve the built static files."""

    kind: str  # node | python | static | unknown
    build: list[list[str]] = field(default_factory=list)
    start: list[str] | None = None
    note: str = ""


def _static_root(root: Path) -> Path | None:
    """The directory holding the site's index.html: the root, else dist/, build/, public/."""
    return next((root / d for d in STATIC_DIRS if (root / d / "index.html").is_file()), None)


def detect_project(root: str | Path) -> ProjectSpec:
    """Identify the project type of `root` and its build / start commands."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"project directory {root} does not exist")
    static = _static_root(root)
    if (root / "package.json").is_file():
        try:
            pkg = json.loads((root / "package.json").read_text())
        except json.JSONDecodeError as err:
            return ProjectSpec("node", note=f"package.json is not valid JSON: {err}")
        scripts = pkg.get("scripts") or {}
        build = []
        if (pkg.get("dependencies") or pkg.get("devDependencies")) and not (
            root / "node_modules"
        ).exists():
            build.append(["npm", "install", "--offline", "--no-audit", "--no-fund"])
        if "build" in scripts:
            build.append(["npm", "run", "build"])
        run = next((s for s in ("start", "dev", "preview") if s in scripts), None)
        start = (["npm", "start"] if run == "start" else ["npm", "run", run]) if run else None
        return ProjectSpec("node", build, start)
    entry = next((e for e in PY_ENTRIES if (root / e).is_file()), None)
    if entry:
        pys = sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))
        return ProjectSpec(
            "python", [[sys.executable, "-m", "py_compile", *pys]], [sys.executable, entry]
        )
    if static is not None:
        return ProjectSpec("static")
    return ProjectSpec("unknown", note="no package.json, app.py/server.py/main.py or index.html")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LaunchResult:
    """What building and starting one project did."""

    project: str
    kind: str
    built: bool = False
    started: bool = False
    base_url: str = ""
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.built and self.started


def _clip(text: str, n: int = 1500) -> str:
    return text if len(text) <= n else text[: n // 2] + "\n[...]\n" + text[-n // 2 :]


class RunningProject:
    """A project copied, built and started; `stop()` (or the context exit) ends its server."""

    def __init__(
        self, root: str | Path, build_timeout: float = 180.0, start_timeout: float = 30.0
    ) -> None:
        self.root = Path(root)
        self.spec = detect_project(self.root)
        self.result = LaunchResult(str(self.root), self.spec.kind)
        self.build_timeout, self.start_timeout = build_timeout, start_timeout
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None

    def __enter__(self) -> RunningProject:
        t0 = time.perf_counter()
        try:
            self._launch()
        finally:
            self.result.seconds = round(time.perf_counter() - t0, 2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _launch(self) -> None:
        r, spec = self.result, self.spec
        if spec.kind == "unknown" or spec.note:
            r.log.append(f"identify: {spec.note or 'unknown project type'}")
            return
        self.workdir = Path(tempfile.mkdtemp(prefix="arcforge-web-"))
        work = self.workdir / "app"
        shutil.copytree(self.root, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        for cmd in spec.build:
            try:
                p = subprocess.run(
                    cmd,
                    cwd=work,
                    capture_output=True,
                    text=True,
                    timeout=self.build_timeout,
                    env=self._env(None),
                )
            except (OSError, subprocess.TimeoutExpired) as err:
                r.log.append(f"build: {' '.join(cmd)} failed: {err}")
                return
            r.log.append(f"build: {' '.join(cmd)} -> exit {p.returncode}")
            if p.returncode != 0:
                r.log.append(_clip(p.stdout + p.stderr))
                return
        r.built = True
        self._start(work)

    def _env(self, port: int | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        if port is not None:
            env.update(PORT=str(port), HOST="127.0.0.1")
        return env

    def _start(self, work: Path) -> None:
        r, port = self.result, free_port()
        cmd = self.spec.start
        if cmd is None:
            site = _static_root(work)
            if site is None:
                r.log.append("start: no start script and no index.html in ., dist, build, public")
                return
            cmd = [
                sys.executable,
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(site),
            ]
        log = open(self.workdir / "server.log", "w")  # noqa: SIM115 - closed in stop()
        self._log = log
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=work,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(port),
                start_new_session=True,
            )
        except OSError as err:
            r.log.append(f"start: {' '.join(cmd)} failed: {err}")
            return
        url, deadline = f"http://127.0.0.1:{port}", time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                r.log.append(f"start: {' '.join(cmd[:3])} exited with {self.proc.returncode}")
                r.log.append(_clip((self.workdir / "server.log").read_text()))
                return
            try:
                if httpx.get(url + "/", timeout=2.0).status_code < 500:
                    r.started, r.base_url = True, url
                    r.log.append(f"start: serving on {url}")
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        r.log.append(f"start: nothing answered on {url} within {self.start_timeout:g}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # our own session: the server and children
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def build_success_rate(results: list[LaunchResult]) -> float:
    """BSR: the share of projects that both built and started (0.0 for none)."""
    return sum(r.ok for r in results) / len(results) if results else 0.0
