"""The docker backend: one long-lived container per sandbox, each exec a `docker exec`.

Used where a Docker daemon answers (the `docker` SDK is imported lazily; install it as the
optional extra `docker`). The container has no network, all capabilities dropped,
no-new-privileges, a pids limit and a memory limit, a read-only root filesystem, a tmpfs /tmp,
the host copy of the workspace bound at /workspace and the grading dir bound at /grading.
Agent execs run as uid 1000, which owns the workspace; the grading dir is owned by the
container's root and only grading execs run as root, so agents cannot write reports.
Deliberate simplifications: the wall clock is enforced by coreutils `timeout` inside the image
(plus a host-side read deadline that stops reading and restarts the container); background
processes survive between execs and die at `close()` with the container.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from arcforge.sandbox.execution import limits_prefix
from arcforge.sandbox.files import ExecCall, HostStore, StoreBackedSandbox
from arcforge.sandbox.types import (
    GRADING,
    TRUNCATION_MARKER,
    WORKSPACE,
    ExecResult,
    Limits,
    SandboxError,
)

AGENT_USER = "1000:1000"


def docker_client() -> Any | None:
    """A connected docker client, or None when the SDK or the daemon is missing."""
    try:
        import docker  # lazy: optional dependency
    except ImportError:
        return None
    try:
        client = docker.from_env(timeout=5)
        client.ping()
        return client
    except Exception:  # the SDK raises several unrelated types when no daemon answers
        return None


class DockerSandbox(StoreBackedSandbox):
    """A `Sandbox` backed by a Docker container. Build it with `open_sandbox(backend="docker")`."""

    backend = "docker"
    workdir = WORKSPACE

    def __init__(
        self,
        workspace: str | Path | None,
        limits: Limits,
        image: str = "python:3.11-slim",
        env: dict[str, str] | None = None,
    ):
        client = docker_client()
        if client is None:
            raise SandboxError("docker backend needs the `docker` package and a running daemon")
        self.limits, self.env = limits, dict(env or {})
        self.store = HostStore(workspace, owner=None)
        self.container = client.containers.run(
            image,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            cap_drop=["ALL"],
            cap_add=["CHOWN", "DAC_OVERRIDE", "FOWNER"],  # root's grading execs only
            security_opt=["no-new-privileges"],
            pids_limit=limits.max_processes + 8,
            mem_limit=f"{limits.memory_mb}m",
            read_only=True,
            tmpfs={"/tmp": f"size={limits.tmp_mb}m"},
            volumes={
                str(self.store.workspace): {"bind": WORKSPACE, "mode": "rw"},
                str(self.store.grading): {"bind": GRADING, "mode": "rw"},
            },
            working_dir=WORKSPACE,
        )
        self._after_host_change()

    def _after_host_change(self) -> None:
        # Files the host wrote belong to the host user; hand the workspace to the agent uid
        # and keep /grading root-only-writable.
        self.container.exec_run(
            [
                "sh",
                "-c",
                f"chown -R {AGENT_USER} {WORKSPACE}; chown 0:0 {GRADING}; chmod 755 {GRADING}",
            ],
            user="0:0",
        )

    def _run(self, call: ExecCall) -> ExecResult:
        """Run `cmd` with sh in the container (`stdin` is written to a temp file and piped)."""
        cmd, wall = call.cmd, call.wall
        if call.stdin is not None:
            self.store.write(".arcforge_stdin", call.stdin, 0o644, WORKSPACE)
            self._after_host_change()
            cmd = f"( {cmd}\n) < {WORKSPACE}/.arcforge_stdin"
        script = f'{limits_prefix(self.limits, nproc=False)}; exec sh -c "$1"'
        argv = ["timeout", "-s", "KILL", str(wall), "sh", "-c", script, "arcforge", cmd]
        start = time.monotonic()
        api = self.container.client.api
        exec_id = api.exec_create(
            self.container.id,
            argv,
            workdir=call.cwd or WORKSPACE,
            environment={**self.env, **call.env},
            user="0:0" if call.grading else AGENT_USER,
        )["Id"]
        stream = api.exec_start(exec_id, stream=True, demux=True)
        out, err, used, truncated, timed_out = bytearray(), bytearray(), 0, False, False
        for o, e in stream:
            for chunk, sink in ((o, out), (e, err)):
                if chunk:
                    room = self.limits.output_bytes - used
                    truncated = truncated or len(chunk) > room
                    sink += chunk[: max(room, 0)]
                    used += min(len(chunk), max(room, 0))
            timed_out = time.monotonic() - start > wall + 2
            if truncated or timed_out:
                self.container.restart(timeout=0)
                break
        code = 137 if truncated or timed_out else int(api.exec_inspect(exec_id)["ExitCode"] or 0)
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if truncated:
            stdout += TRUNCATION_MARKER.format(n=self.limits.output_bytes)
        timed_out = timed_out or code == 137 and time.monotonic() - start >= wall
        return ExecResult(code, stdout, stderr, timed_out, truncated, time.monotonic() - start)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.container.remove(force=True)
            finally:
                self.store.remove()
