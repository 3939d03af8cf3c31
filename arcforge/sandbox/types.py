"""The sandbox's data contracts: `Limits`, `ExecResult`, `SnapshotId` and the `Sandbox` protocol.

Every backend (bwrap, docker, local) returns the same `ExecResult` and honours the same
`Limits`, so an environment never needs to know which backend runs its commands. This module
imports nothing else from arcforge.envs so that backends and tests can share it freely.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import NewType, Protocol, runtime_checkable

SnapshotId = NewType("SnapshotId", str)

# Paths as the sandboxed command sees them (the local backend maps them to its temp copy).
WORKSPACE = "/workspace"
GRADING = "/grading"
TRUNCATION_MARKER = "\n[arcforge: output truncated after {n} bytes]\n"
# Container-like roots (arcforge.sandbox.root): the workspace's container path, the system dirs a
# layer makes writable, the layer-local venv, and where a task's tests and logs appear.
APP = "/app"
LAYER_DIRS = ("etc", "usr/local", "root", "opt", "var", "home", "srv")
VENV = "/usr/local/venv"
CONTAINER_MOUNTS = (("tests", "/tests"), ("logs", "/logs"))  # grading/<name> -> path


class SandboxError(RuntimeError):
    """The sandbox itself failed (could not start, bad path), not the command inside it."""


@dataclass(frozen=True)
class Limits:
    """Per-exec resource limits. Every exec gets all of them; none can be raised from inside.

    Attributes:
        wall_time: seconds before the whole exec (every process in it) is killed.
        cpu_seconds: CPU seconds per process (RLIMIT_CPU; SIGXCPU, then SIGKILL).
        memory_mb: memory per process in MiB: address space (RLIMIT_AS) by default, or the
            data segment (RLIMIT_DATA: heap and private mappings) when `memory_rlimit` is
            "data". Runtimes that reserve huge virtual ranges up front (JVM, Go, some JITs,
            every thread's stack reservation) need a larger value under "as".
        memory_rlimit: "as" or "data". Test suites of real repositories run under "data",
            which counts memory that is written, not reserved, so threaded tests work.
        max_processes: processes/threads the command may have at once, itself included
            (RLIMIT_NPROC, counted inside the sandbox's own user namespace; bwrap only).
        output_bytes: stdout + stderr kept in total; past it the exec is killed and the
            output ends with a truncation marker.
        file_size_mb: largest file a process may write (RLIMIT_FSIZE).
        tmp_mb: size of the private /tmp tmpfs (bwrap), which is fresh for every exec.
    """

    wall_time: float = 30
    cpu_seconds: int = 30
    memory_mb: int = 1024
    max_processes: int = 64
    output_bytes: int = 1_000_000
    file_size_mb: int = 1024
    tmp_mb: int = 512
    memory_rlimit: str = "as"


@dataclass(frozen=True)
class RootLayer:
    """A built system layer for a container-like root (see arcforge.sandbox.root).

    Attributes:
        path: host directory with app/ (seeds /app) and the LAYER_DIRS trees.
        workdir: the Dockerfile's last WORKDIR (default cwd of every exec).
        env: the Dockerfile's ENV values (every exec gets them).
    """

    path: Path
    workdir: str = APP
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> RootLayer:
        meta = json.loads((Path(path) / "layer.json").read_text())
        return cls(Path(path), meta.get("workdir", APP), dict(meta.get("env") or {}))

    def save(self) -> None:
        meta = {"workdir": self.workdir, "env": self.env}
        (self.path / "layer.json").write_text(json.dumps(meta, indent=1))


@dataclass
class ExecResult:
    """What one exec produced. `exit_code` follows the shell: 128 + N when killed by signal N."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration: float  # seconds, wall clock, measured on the host

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@runtime_checkable
class Sandbox(Protocol):
    """A private workspace plus a way to run shell commands against it.

    Paths given to the file methods are sandbox paths: relative ones are under /workspace;
    absolute ones must lie under /workspace or /grading.
    """

    backend: str
    workdir: str  # where the workspace appears to commands ("/workspace" except for local)

    def exec(
        self,
        cmd: str,
        timeout: float | None = None,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        grading: bool = False,
    ) -> ExecResult: ...

    def write_file(self, path: str, content: str | bytes, mode: int | None = None) -> None: ...

    def read_file(self, path: str) -> str: ...

    def copy_in(self, host_path: str | Path, sandbox_path: str) -> None: ...

    def copy_out(self, sandbox_path: str, host_path: str | Path) -> None: ...

    def snapshot(self) -> SnapshotId: ...

    def restore(self, snapshot_id: SnapshotId | None = None) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...
