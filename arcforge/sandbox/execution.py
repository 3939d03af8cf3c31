"""Run one process tree under a wall clock and an output cap, and build the rlimit wrapper.

`run_capped` starts a command in its own session, streams stdout and stderr through a
selector (never `communicate()`, which would buffer a 1 GB print in host memory), keeps at
most `output_bytes` of them, and SIGKILLs the whole process group when the output cap or the
wall clock is exceeded. `limits_prefix` is the shell line that sets the rlimits *inside* the
sandbox: RLIMIT_NPROC must be set after bubblewrap has created its user namespace, because
the kernel counts it per (user namespace, uid) and never applies it to host root.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from arcforge.sandbox.types import TRUNCATION_MARKER, ExecResult, Limits, SandboxError

# the PATH a bubblewrap sandbox's commands (and bubblewrap itself) run with
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_CHUNK = 65536


def limits_prefix(limits: Limits, nproc: bool = True, nproc_slack: int = 1) -> str:
    """A bash line setting hard+soft rlimits for everything exec'd after it.

    Args:
        limits: the limits to apply.
        nproc: set RLIMIT_NPROC (only meaningful inside a private user namespace; for a plain
            subprocess it would count every process of the host user).
        nproc_slack: processes the sandbox itself holds (bubblewrap's init), added to the limit.
    """
    parts = [
        # soft < hard: SIGXCPU first (catchable, recognisable), SIGKILL a second later
        f"ulimit -S -t {int(limits.cpu_seconds)}",
        f"ulimit -H -t {int(limits.cpu_seconds) + 1}",
        f"ulimit -{'d' if limits.memory_rlimit == 'data' else 'v'} {int(limits.memory_mb) * 1024}",
        f"ulimit -f {int(limits.file_size_mb) * 1024}",  # bash counts -f in 1024-byte blocks
        "ulimit -c 0",
    ]
    if nproc:
        parts.append(f"ulimit -u {int(limits.max_processes) + nproc_slack}")
    return " && ".join(parts)


def wrap_command(cmd: str, limits: Limits, shell: str = "/bin/bash", nproc: bool = True) -> list:
    """argv that applies `limits` then execs `shell -c cmd` (the command text is never spliced)."""
    script = (
        f'{limits_prefix(limits, nproc)} || {{ echo "arcforge: cannot set limits" >&2; exit 125; }}'
        f'; exec {shell} -c "$1"'
    )
    return [shell, "-c", script, "arcforge", cmd]


@dataclass
class _Capture:
    budget: int
    used: int = 0
    truncated: bool = False
    cut_stderr: bool = False  # which stream hit the cap (it gets the marker)

    def take(self, chunk: bytes, sink: bytearray, is_stderr: bool) -> None:
        room = self.budget - self.used
        if len(chunk) > room:
            chunk, self.truncated, self.cut_stderr = chunk[: max(room, 0)], True, is_stderr
        sink += chunk
        self.used += len(chunk)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _pump(
    proc: subprocess.Popen, stdin: bytes | None, deadline: float, cap: _Capture
) -> tuple[bytes, bytes, bool]:
    """Feed stdin and drain stdout/stderr until both close, the deadline or the cap."""
    out, err = bytearray(), bytearray()
    sinks = {proc.stdout: out, proc.stderr: err}
    sel = selectors.DefaultSelector()
    for f in sinks:
        os.set_blocking(f.fileno(), False)
        sel.register(f, selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    timed_out, open_reads = False, 2
    try:
        while open_reads:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=min(left, 1.0)):
                f = key.fileobj
                if f is proc.stdin:
                    try:
                        n = os.write(f.fileno(), pending[:_CHUNK])
                        pending = pending[n:]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(f)
                        f.close()
                    continue
                chunk = os.read(f.fileno(), _CHUNK)
                if not chunk:
                    sel.unregister(f)
                    open_reads -= 1
                    continue
                cap.take(chunk, sinks[f], f is proc.stderr)
            if cap.truncated:
                break
    finally:
        sel.close()
    return bytes(out), bytes(err), timed_out


def run_capped(
    argv: list[str],
    *,
    timeout: float,
    output_bytes: int,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    user: int | None = None,
) -> ExecResult:
    """Run `argv` in a new session; kill its process group on timeout or too much output.

    Args:
        argv: the program and its arguments.
        timeout: wall-clock seconds.
        output_bytes: stdout + stderr bytes kept in total.
        stdin: text fed to the process (stdin is /dev/null when None).
        env: the complete environment (None inherits ours).
        cwd: working directory on the host.
        user: run as this uid/gid (no supplementary groups); used when we are root.
    Returns:
        the ExecResult; exit_code is 128 + N when a signal N ended the process.
    """
    start = time.monotonic()
    ids = {} if user is None else {"user": user, "group": user, "extra_groups": []}
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
        **ids,
    )
    cap = _Capture(budget=output_bytes)
    try:
        out, err, timed_out = _pump(proc, (stdin or "").encode(), start + timeout, cap)
        if timed_out or cap.truncated:
            _kill_group(proc)
        try:
            # a short grace: the pipes closing slightly before the exit status is normal
            code = proc.wait(timeout=max(start + timeout - time.monotonic(), 0.2))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            code = proc.wait()
    finally:
        _kill_group(proc)  # stragglers that left the pipes but kept the process group
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None and not f.closed:
                f.close()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if cap.truncated:
        marker = TRUNCATION_MARKER.format(n=output_bytes)
        if cap.cut_stderr:
            stderr += marker
        else:
            stdout += marker
    return ExecResult(
        exit_code=128 - code if code < 0 else code,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        truncated=cap.truncated,
        duration=time.monotonic() - start,
    )


def run_bwrap(
    argv: list[str],
    wall: float,
    stdin: str | None,
    limits: Limits,
    root: Path,
    uid: int | None,
) -> ExecResult:
    """Run a bubblewrap command line from `root` as `uid` with PATH only; bubblewrap's own
    failures and limits that could not be applied raise SandboxError instead of returning."""
    res = run_capped(
        argv,
        timeout=wall,
        output_bytes=limits.output_bytes,
        stdin=stdin,
        env={"PATH": PATH},
        cwd=str(root),
        user=uid,
    )
    if res.exit_code == 1 and res.stderr.startswith("bwrap:"):
        raise SandboxError(f"bubblewrap failed: {res.stderr.strip()}")
    if res.exit_code == 125 and res.stderr.endswith("arcforge: cannot set limits\n"):
        raise SandboxError(f"could not apply limits: {res.stderr.strip()}")
    return res
