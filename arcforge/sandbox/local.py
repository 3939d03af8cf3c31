"""The local backend: a plain subprocess in a temp copy of the workspace. Trusted code only.

It contains nothing (the host filesystem, network and processes are all reachable); it only
applies the same wall-clock, output, CPU, memory and file-size limits and the same snapshot
semantics, so tests of trusted code can run where bubblewrap cannot. `open_sandbox` refuses it
unless the caller passes `trusted=True`. Differences from bwrap: the workspace lives at
`sandbox.workdir` (a host temp path, not /workspace: absolute sandbox paths starting with
/workspace are mapped for the file methods, but not inside command text); no process limit
(RLIMIT_NPROC would count every process of the host user); the environment is inherited.
"""

from __future__ import annotations

import os
from pathlib import Path

from arcforge.sandbox.execution import run_capped, wrap_command
from arcforge.sandbox.files import ExecCall, HostStore, StoreBackedSandbox
from arcforge.sandbox.types import GRADING, WORKSPACE, ExecResult, Limits


class LocalSandbox(StoreBackedSandbox):
    """A `Sandbox` that is not a sandbox: subprocesses in a temp dir, for trusted commands."""

    backend = "local"

    def __init__(
        self, workspace: str | Path | None, limits: Limits, env: dict[str, str] | None = None
    ):
        self.limits, self.env = limits, dict(env or {})
        self.store = HostStore(workspace, owner=None)
        self.workdir = str(self.store.workspace)

    def _run(self, call: ExecCall) -> ExecResult:
        """Run `cmd` with bash in the workspace copy (`grading` has no effect: nothing is
        read-only here)."""
        cwd = call.cwd
        if cwd is not None and cwd.startswith(WORKSPACE):
            cwd = self.workdir + cwd[len(WORKSPACE) :]
        elif cwd is not None and cwd.startswith(GRADING):
            cwd = str(self.store.grading) + cwd[len(GRADING) :]
        return run_capped(
            wrap_command(call.cmd, self.limits, nproc=False),
            timeout=call.wall,
            output_bytes=self.limits.output_bytes,
            stdin=call.stdin,
            env={**os.environ, **self.env, **call.env},
            cwd=cwd or self.workdir,
        )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.store.remove()
