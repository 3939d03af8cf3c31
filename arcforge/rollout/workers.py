"""In-process rollout workers: threads that pull jobs from the orchestrator and run episodes.

Each worker loops `acquire -> run_lease -> complete | fail` until the orchestrator closes. All
workers share one `EngineGateway`, so their generate calls are merged into batches and weight
pushes land between calls (episodes in flight continue on the new version: partial rollouts).
Environment time (sandbox execs, HTTP services) overlaps across workers and with training.

GIL: the trainer and the engine run torch in threads of one process; every torch op releases
and retakes the GIL, and with the default 5 ms switch interval each retake can wait behind a
busy thread (a convoy that made training steps ~4x slower in benchmarks/async_vs_sync.py).
While the workers run, the interpreter's switch interval is lowered (`switch_interval`) and
restored at `stop()`. Processes (the Ray backend, or an engine behind `arcforge serve`) avoid
the GIL altogether.

`kill(i)` is the crash path: the worker's current lease is failed at once (the orchestrator
retries the job on another worker/service) and the thread is abandoned; Python cannot stop a
thread, so whatever it still produces is rejected by the orchestrator's lease check. The Ray
backend (arcforge.rollout.ray_backend) offers the same interface with worker actors.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import torch

from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.engines.base import Engine
from arcforge.rollout.gateway import EngineGateway, push_weights
from arcforge.rollout.orchestrator import Lease, Orchestrator
from arcforge.types import Trajectory


def run_lease(
    engine: Engine,
    tokenizer: Any,
    lease: Lease,
    cfg: AgentConfig,
    pool_cfgs: Mapping[str, AgentConfig] | None = None,
) -> list[Trajectory]:
    """Run the lease's `group_size` episodes of its task on its service, stepped together, with
    its pool's agent config where `pool_cfgs` has one (e.g. its own temperature), else `cfg`."""
    cfg = (pool_cfgs or {}).get(lease.pool, cfg)
    return run_episodes(engine, tokenizer, lease.service.open, [lease.task], cfg, lease.group_size)


class LocalWorkers:
    """`n` rollout-worker threads over one shared engine.

    Args:
        orch: the orchestrator to pull jobs from.
        engine: an Engine (wrapped in an EngineGateway unless it is one).
        tokenizer: the engine model's tokenizer.
        cfg: the agent loop config (leave its seed None so that workers' calls can merge).
        n: worker threads.
        pool_cfgs: pool -> the agent config of that pool's episodes, where it differs from
            `cfg` (a pool sampled at its own temperature).
        switch_interval: sys.setswitchinterval while running (None: leave it alone).
    """

    def __init__(
        self,
        orch: Orchestrator,
        engine: Engine,
        tokenizer: Any,
        cfg: AgentConfig,
        n: int,
        switch_interval: float | None = 5e-4,
        pool_cfgs: Mapping[str, AgentConfig] | None = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"need at least one rollout worker, got {n}")
        self.orch, self.tokenizer, self.cfg, self.n = orch, tokenizer, cfg, n
        self.pool_cfgs = dict(pool_cfgs or {})
        self.gateway = engine if isinstance(engine, EngineGateway) else EngineGateway(engine)
        self._threads: list[threading.Thread] = []
        self._current: dict[int, Lease | None] = {}
        self._killed: set[int] = set()
        self._lock = threading.Lock()
        self.switch_interval, self._saved_interval = switch_interval, sys.getswitchinterval()

    def start(self) -> None:
        self.orch.check_services()
        if self.switch_interval is not None:
            self._saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(self.switch_interval)
        for i in range(self.n):
            th = threading.Thread(target=self._loop, args=(i,), daemon=True, name=f"rollout-{i}")
            self._threads.append(th)
            th.start()

    def _loop(self, i: int) -> None:
        while i not in self._killed:
            lease = self.orch.acquire(f"local-{i}")
            if lease is None:
                return
            with self._lock:
                self._current[i] = lease
            try:
                trajs = run_lease(self.gateway, self.tokenizer, lease, self.cfg, self.pool_cfgs)
            except Exception as err:  # a crash of this worker's episode: retry elsewhere
                self.orch.fail(lease, f"worker {i}: {type(err).__name__}: {err}")
                continue
            finally:
                with self._lock:
                    self._current[i] = None
            self.orch.complete(lease, trajs)  # rejected if this worker was declared dead

    def current(self, i: int) -> Lease | None:
        """The lease worker `i` is running now, if any."""
        with self._lock:
            return self._current.get(i)

    def kill(self, i: int) -> Lease | None:
        """Declare worker `i` dead: its running job is retried elsewhere; returns that lease."""
        with self._lock:
            self._killed.add(i)
            lease = self._current.get(i)
        if lease is not None:
            self.orch.fail(lease, f"worker {i} was killed mid-episode")
        return lease

    def push_weights(
        self, state_dict: dict[str, torch.Tensor], version: int, timeout: float
    ) -> float:
        """Load new weights into the engine (WeightSyncTimeout after `timeout` s), then tell the
        orchestrator the new version. Returns seconds taken."""
        dt = push_weights([self.gateway], state_dict, version, timeout)
        self.orch.set_version(version)
        return dt

    def stop(self, timeout: float = 30.0) -> None:
        """Close the orchestrator and the gateway; wait (at most `timeout` s) for the threads."""
        self.orch.close()
        self.gateway.close()  # episodes still running end with GatewayClosed (discarded)
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
        if self.switch_interval is not None:
            sys.setswitchinterval(self._saved_interval)
