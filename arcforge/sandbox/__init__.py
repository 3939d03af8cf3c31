"""Run model-written commands safely: `open_sandbox(...)` returns a `Sandbox` (docs/sandbox.md).

Backends:
    bwrap  (default on Linux) bubblewrap namespaces: no network, read-only system dirs, no
           host files, private PID space, a private writable /workspace; see arcforge.sandbox.bwrap.
    docker a container per sandbox where a daemon answers (optional `docker` extra).
    local  a plain subprocess in a temp dir, for trusted commands only (`trusted=True`).

The caller's `workspace` directory is *copied* into the sandbox when it opens (snapshot
semantics: the host directory is never touched, and `restore()` can always rebuild the
workspace exactly). Every exec gets the same `Limits`; output past `output_bytes` is cut with
a marker and the exec killed.

Grading: `/grading` is a second directory that agent execs see read-only and
`exec(..., grading=True)` execs may write. A grader copies hidden tests in with `copy_in`
only at grading time, has the test runner write its report under /grading, and reads it
back with `read_file("/grading/...")`. A grading exec still runs code the agent may have
edited (a conftest.py, a sitecustomize), so graders must neutralise that themselves.

Python inside the sandbox is the system /usr/bin/python3; the project's virtualenv lives under
/work, which is not visible. To give sandboxed code a package such as pytest, bind a host
site-packages directory read-only and point PYTHONPATH at it:

    site = host_site_packages()
    open_sandbox(extra_ro_binds={site: "/opt/pysite"}, env={"PYTHONPATH": "/opt/pysite"})

(pure-Python packages work when the host and system Python share a minor version).
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path
from typing import Any

from arcforge.sandbox.types import (
    GRADING,
    WORKSPACE,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SnapshotId,
)

__all__ = [
    "GRADING",
    "WORKSPACE",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SnapshotId",
    "available_backends",
    "host_site_packages",
    "open_sandbox",
]


def open_sandbox(
    backend: str = "bwrap",
    workspace: str | Path | None = None,
    limits: Limits | None = None,
    trusted: bool = False,
    **kw: Any,
) -> Sandbox:
    """Open a sandbox over a private copy of `workspace`.

    Args:
        backend: "bwrap", "docker" or "local".
        workspace: host directory copied to /workspace (None: start empty).
        limits: per-exec limits (default `Limits()`).
        trusted: must be True for the "local" backend, which contains nothing.
        **kw: backend options. bwrap: `extra_ro_binds` {host_path: sandbox_path},
            `env` {name: value} for every exec, `shell`. docker: `image`, `env`.
            local: `env`.
    Returns:
        a Sandbox; use it as a context manager or call `close()`.
    Raises:
        ValueError: unknown backend, or "local" without trusted=True.
        SandboxError: the backend cannot start here.
    """
    limits = limits or Limits()
    if backend == "bwrap":
        from arcforge.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(workspace, limits, **kw)
    if backend == "docker":
        from arcforge.sandbox.docker import DockerSandbox

        return DockerSandbox(workspace, limits, **kw)
    if backend == "local":
        if not trusted:
            raise ValueError(
                "the 'local' backend runs commands unsandboxed on the host; pass trusted=True "
                "only for commands you wrote yourself, or use backend='bwrap'"
            )
        from arcforge.sandbox.local import LocalSandbox

        return LocalSandbox(workspace, limits, **kw)
    raise ValueError(f"unknown sandbox backend {backend!r}; choose bwrap, docker or local")


def available_backends() -> list[str]:
    """Backends that can start here, most isolated first ("local" is always last)."""
    from arcforge.sandbox.bwrap import bwrap_available
    from arcforge.sandbox.docker import docker_client

    found = ["bwrap"] if bwrap_available() else []
    if docker_client() is not None:
        found.append("docker")
    return [*found, "local"]


SANDBOX_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py")


def host_site_packages() -> Path:
    """A world-readable copy of the packages sandboxed code needs (pytest and its deps).

    Sandboxed commands run as an unprivileged uid that may not be able to traverse the path of
    the running virtualenv (a checkout under a 0700 temporary directory, a home directory), so
    the few pure-Python packages are copied once into a cache directory under the system temp
    dir that every uid can read, keyed by the source site-packages and its pytest version.
    Bind the result read-only (see the module docstring).
    """
    import hashlib
    import shutil
    import tempfile
    from importlib.metadata import version

    src = Path(sysconfig.get_paths()["purelib"])
    key = hashlib.sha1(f"{src}:{version('pytest')}".encode()).hexdigest()[:12]
    dest = Path(tempfile.gettempdir()) / f"arcforge-pysite-{key}"
    if (dest / ".complete").exists():
        return dest
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-pysite-", dir=dest.parent))
    for entry in src.iterdir():
        name = entry.name.split("-")[0].lower()
        if entry.name in SANDBOX_PACKAGES or (
            entry.suffix == ".dist-info" and name in {p.lower() for p in SANDBOX_PACKAGES}
        ):
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, tmp / entry.name)
    (tmp / ".complete").write_text("ok")
    for root, _dirs, files in os.walk(tmp):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    try:
        os.replace(tmp, dest)
    except OSError:  # another process won the race: use its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
