"""Shared fixtures for the sandbox tests: a bwrap availability skip, a host-latency probe and
the host bait a contained sandbox must not reach."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from arcforge.sandbox import Limits, Sandbox, open_sandbox
from arcforge.sandbox.bwrap import bwrap_available

_HAS_BWRAP = bwrap_available()


@dataclass
class Latency:
    samples: list[float] = field(default_factory=list)

    @property
    def worst(self) -> float:
        return max(self.samples, default=0.0)


@contextmanager
def _host_latency(period: float = 0.1) -> Iterator[Latency]:
    """While the block runs, time a host `true` every `period` s; `.worst` is the slowest."""
    lat, stop = Latency(), threading.Event()

    def probe() -> None:
        while not stop.is_set():
            t = time.monotonic()
            subprocess.run(["/bin/true"], check=True)
            lat.samples.append(time.monotonic() - t)
            stop.wait(period)

    th = threading.Thread(target=probe, daemon=True)
    th.start()
    try:
        yield lat
    finally:
        stop.set()
        th.join()


@pytest.fixture
def host_latency():
    """`with host_latency() as lat: ...` then assert on `lat.worst` (seconds)."""
    return _host_latency


@pytest.fixture
def bwrap_box(tmp_path) -> Iterator:
    """Factory `bwrap_box(limits=None, workspace=None, **kw)` of bwrap sandboxes, closed after
    the test; the test is skipped where bubblewrap cannot run."""
    if not _HAS_BWRAP:
        pytest.skip("bubblewrap cannot run here")
    opened: list[Sandbox] = []

    def make(limits: Limits | None = None, workspace=None, **kw) -> Sandbox:
        sb = open_sandbox("bwrap", workspace=workspace, limits=limits, **kw)
        opened.append(sb)
        return sb

    yield make
    for sb in opened:
        sb.close()


@pytest.fixture
def host_bait() -> Iterator[tuple[Path, int]]:
    """(secret, port): a file holding "s3cret" in the host user's home and a port listening on
    the host's loopback (the kernel completes connections to it), both gone after the test."""
    secret = Path.home() / ".arcforge-test-secret"
    secret.write_text("s3cret")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        yield secret, srv.getsockname()[1]
    finally:
        srv.close()
        secret.unlink()
