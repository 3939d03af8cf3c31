"""A thread-safe engine gateway for concurrent rollout workers, and weight pushes with a timeout.

`EngineGateway` wraps one `Engine` so that many rollout-worker threads can share it while a
trainer pushes new weights:
- generate calls from all threads go through one queue and one serving thread; whatever is
  queued when the engine becomes free is merged into one batched `generate` (requests with equal
  SamplingParams), which is continuous batching at turn granularity;
- every returned `Completion` is stamped with the weight version that sampled it (read under the
  same lock as the generate call), so a weight update between a worker reading `version` and
  its generate call can never mislabel a segment (the agent loop prefers `Completion.version`);
- `load_weights` takes the same lock: weights never change in the middle of a generate call, and
  an episode in flight simply continues with the new version on its next turn (partial rollout).

`push_weights` loads a state dict into several engines at once and raises `WeightSyncTimeout`
when any of them has not finished within the timeout (a hung server, or a generate call that
never returns and so never releases the lock) instead of blocking the trainer forever. The
thread doing the hung load cannot be killed; it is left behind as a daemon.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from arcforge.rollout.engines.base import Completion, Engine, SamplingParams


class WeightSyncTimeout(TimeoutError):
    """A weight push did not complete in time."""


class GatewayClosed(RuntimeError):
    """The gateway was closed while a generate call waited."""


@dataclass
class _Request:
    prompts: list[list[int]]
    params: SamplingParams
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Completion] | None = None
    error: BaseException | None = None


class EngineGateway:
    """The Engine protocol over a shared engine, safe to call from many threads.

    Args:
        engine: the engine to share (LocalEngine, ServerEngine, ...).
        name: used in error messages.
    """

    def __init__(self, engine: Engine, name: str = "engine") -> None:
        self.engine, self.name = engine, name
        self._lock = threading.Lock()  # held while generating or loading weights
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"{name}-gateway")
        self._closed = False
        self._thread.start()
        self.calls = 0  # engine.generate calls made (merged requests count once)
        self.requests = 0  # generate requests received

    @property
    def version(self) -> int:
        return self.engine.version

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if not prompts:
            return []
        if self._closed:
            raise GatewayClosed(f"{self.name} is closed")
        req = _Request([list(p) for p in prompts], params)
        self._queue.put(req)
        req.done.wait()
        if req.error is not None:
            raise req.error
        return req.result  # type: ignore[return-value]

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            reqs = [first]
            while True:  # take whatever else is already waiting
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                reqs.append(nxt)
            groups: dict[SamplingParams, list[_Request]] = {}
            for r in reqs:
                groups.setdefault(r.params, []).append(r)
            for params, group in groups.items():
                self._run(params, group)

    def _run(self, params: SamplingParams, group: list[_Request]) -> None:
        prompts = [p for r in group for p in r.prompts]
        try:
            while not self._lock.acquire(timeout=0.1):  # a weight load may hang: stay closable
                if self._closed:
                    raise GatewayClosed(f"{self.name} was closed while waiting for the engine")
            try:
                outs = self.engine.generate(prompts, params)
                version = self.engine.version
            finally:
                self._lock.release()
            self.calls, self.requests = self.calls + 1, self.requests + len(group)
            pos = 0
            for r in group:
                n = len(r.prompts) * params.n
                r.result = [replace(c, version=version) for c in outs[pos : pos + n]]
                pos += n
        except BaseException as err:  # hand the failure to every waiting caller
            for r in group:
                r.error = err
        for r in group:
            r.done.set()

    def load_weights(
        self, state_dict: dict[str, torch.Tensor], version: int, timeout: float | None = None
    ) -> None:
        """Load weights between generate calls; raises WeightSyncTimeout if the engine stays
        busy for longer than `timeout` seconds."""
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise WeightSyncTimeout(
                f"weight sync of version {version} to {self.name}: the engine stayed busy for "
                f"{timeout:.1f}s (a generate call is not returning)"
            )
        try:
            self.engine.load_weights(state_dict, version)
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop serving: waiting and later generate calls raise GatewayClosed."""
        self._closed = True
        while True:
            try:
                req = self._queue.get_nowait()
            except queue.Empty:
                break
            if req is not None:
                req.error = GatewayClosed(f"{self.name} is closed")
                req.done.set()
        self._queue.put(None)


def push_weights(
    targets: list[Any], state_dict: dict[str, torch.Tensor], version: int, timeout: float
) -> float:
    """`target.load_weights(state_dict, version)` on every target in parallel, within `timeout`.

    Returns:
        seconds taken.
    Raises:
        WeightSyncTimeout: naming the targets that had not finished (their threads are left
            running as daemons); the first error a target raised is re-raised as is.
    """
    t0 = time.monotonic()
    errors: list[BaseException] = []

    def load(target: Any) -> None:
        try:
            if isinstance(target, EngineGateway):
                target.load_weights(state_dict, version, timeout)
            else:
                target.load_weights(state_dict, version)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=load, args=(t,), daemon=True) for t in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join(max(0.0, timeout - (time.monotonic() - t0)))
    hung = [
        str(getattr(t, "name", type(t).__name__))
        for t, th in zip(targets, threads)
        if th.is_alive()
    ]
    if errors:
        raise errors[0]
    if hung:
        raise WeightSyncTimeout(
            f"weight sync of version {version} did not finish within {timeout:.1f}s on "
            f"{', '.join(hung)}: the inference engine is hung or unreachable"
        )
    return time.monotonic() - t0
