"""Running rollout workers in a test: started for a block and always stopped, and a worker
killed while one of its episodes is open."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def running(workers: Any) -> Iterator[Any]:
    """`workers` started for the block and stopped on the way out, whatever happens."""
    workers.start()
    try:
        yield workers
    finally:
        workers.stop()


def kill_in_episode(workers: Any, envs: Any, timeout: float, poll: float) -> Any:
    """Kill worker 0 once it holds a lease and the environment host has an episode open (or
    after `timeout` seconds); returns what `workers.kill(0)` returns (None: nothing held)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (
        workers.current(0) is None or envs.endpoint.call("info", {})["open"] == 0
    ):
        time.sleep(poll)
    return workers.kill(0)
