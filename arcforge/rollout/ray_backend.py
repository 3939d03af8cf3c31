"""Ray backend: rollout workers and environment hosts as Ray actors, under the same orchestrator.

The orchestrator stays in the driver process (it is bookkeeping: leases, quotas, versions).
Each rollout worker is a `RolloutActor` holding its own inference engine (a LocalEngine behind
an EngineGateway, so a weight push lands between generate calls while an episode runs: the
actor is threaded, max_concurrency 2) and running `run_lease` on the leases a driver thread
feeds it. Environments run in `EnvHost` actors (`ray_env_service`): the same JSON protocol as
the HTTP services, reached through `RayEndpoint`, so a worker on one node can drive sandboxes
on another. On one machine `ray.init(num_cpus=...)` starts a local cluster; on many machines
start `ray start --head` on one node and `ray start --address=<head>:6379` on the others, then
run with backend "ray" and ray_address "auto" (docs/scaling.md).

Faults: a worker actor that dies (process killed, node lost) raises RayActorError in its
driver thread; the lease is failed (the orchestrator retries it on another worker), Ray
restarts the actor (max_restarts) and the driver reloads the latest weights into it before
its next job. Any other error of a job's call (an actor unreachable, an object lost) fails
its lease too, so a job is never left leased to a thread that gave up on it. The orchestrator
accepts one result per lease attempt: a killed attempt's output can never join a batch beside
its retry's. Weight pushes put the state dict in the object store once and wait for every
actor with a timeout (WeightSyncTimeout). Deliberate simplification: one driver thread per
worker actor, one lease at a time per actor.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from arcforge.errors import UserError
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.envservice import EnvHost, EnvService, EnvServiceError, RemoteEnv
from arcforge.rollout.gateway import EngineGateway, WeightSyncTimeout
from arcforge.rollout.orchestrator import Lease, Orchestrator
from arcforge.types import Task, Trajectory


def require_ray():
    """The ray module, or a UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(
            "backend 'ray' needs the ray package: pip install 'arcforge[ray]'"
        ) from None
    return ray


def init_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join the cluster at `address` ("auto": the one `ray start` made), or start a local one."""
    ray = require_ray()
    if ray.is_initialized():
        return
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address:
        kw["address"] = address
    elif num_cpus:
        kw["num_cpus"] = num_cpus
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # loopback/private cluster by default
    try:
        ray.init(**kw)
    except ConnectionError as err:
        raise UserError(f"cannot join the Ray cluster at {address!r}: {err}") from None


class RolloutActor:
    """A rollout worker process: its own engine copy, tokenizer and agent config."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        cfg: AgentConfig,
        pad_token_id: int,
        precision: str = "fp32",
        threads: int = 1,
        pool_cfgs: dict[str, AgentConfig] | None = None,
    ) -> None:
        from arcforge.rollout.engines.local import LocalEngine

        torch.set_num_threads(threads)
        engine = LocalEngine(model, pad_token_id=pad_token_id, precision=precision)
        self.gateway = EngineGateway(engine, name=f"rollout actor pid {os.getpid()}")
        self.tokenizer, self.cfg, self.pool_cfgs = tokenizer, cfg, pool_cfgs or {}

    def run(self, lease: Lease) -> list[Trajectory]:
        from arcforge.rollout.workers import run_lease

        return run_lease(self.gateway, self.tokenizer, lease, self.cfg, self.pool_cfgs)

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> int:
        self.gateway.load_weights(state_dict, version)
        return version

    def version(self) -> int:
        return self.gateway.version


@dataclass
class RayEndpoint:
    """An EnvHost actor; every protocol call is one actor method call."""

    actor: Any
    name: str

    def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        ray = require_ray()
        try:
            return ray.get(self.actor.call.remote(method, payload))
        except ray.exceptions.RayActorError as err:
            raise EnvServiceError(
                f"env actor {self.name}: {method} failed: actor died: {str(err).splitlines()[0]}"
            ) from None
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if err.cause is not None else err
            raise EnvServiceError(
                f"env actor {self.name}: {method} failed: {type(cause).__name__}: {cause}"
            ) from None

    def open(self, task: Task) -> RemoteEnv:
        return RemoteEnv(self.call, f"ray:{self.name}")


def ray_env_service(
    name: str, kinds: list[str], factory: Any, max_concurrency: int = 8, num_cpus: float = 0
) -> EnvService:
    """Start an EnvHost actor over `factory` (pickled to the actor) and describe it."""
    ray = require_ray()
    cls = ray.remote(num_cpus=num_cpus, max_concurrency=max_concurrency + 2)(EnvHost)
    actor = cls.options(name=None).remote(factory, list(kinds), max_concurrency, name)
    return EnvService(name, list(kinds), max_concurrency, RayEndpoint(actor, name))


class RayWorkers:
    """`n` RolloutActors fed by driver threads; the same interface as LocalWorkers.

    Args:
        orch: the orchestrator (in this process).
        model: the policy to copy into every actor; tokenizer, cfg: as for LocalWorkers.
        n: worker actors. num_cpus: CPUs each actor reserves (its torch threads).
        precision: the actors' engine precision.
        pool_cfgs: as for LocalWorkers (a pool's own agent config).
    """

    def __init__(
        self,
        orch: Orchestrator,
        model: torch.nn.Module,
        tokenizer: Any,
        cfg: AgentConfig,
        n: int,
        *,
        pad_token_id: int,
        precision: str = "fp32",
        num_cpus: int = 1,
        pool_cfgs: dict[str, AgentConfig] | None = None,
    ) -> None:
        ray = require_ray()
        if not ray.is_initialized():
            init_ray()
        self.orch, self.n, self._ray = orch, n, ray
        cls = ray.remote(num_cpus=num_cpus, max_concurrency=2, max_restarts=-1)(RolloutActor)
        # a CPU copy, kept alive: restarts rebuild actors from it (the actors are CPU workers,
        # also when the trainer's model is on a GPU)
        self._model_ref = ray.put(copy.deepcopy(model).to("cpu"))
        self.actors = [
            cls.remote(
                self._model_ref, tokenizer, cfg, pad_token_id, precision, num_cpus, pool_cfgs
            )
            for _ in range(n)
        ]
        self._weights: tuple[Any, int] | None = None  # the latest (object ref, version)
        self._current: dict[int, Lease | None] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.restarts = 0

    def start(self, timeout: float = 600.0) -> None:
        """Wait until every actor is constructed, then start feeding them jobs."""
        self.orch.check_services()
        try:
            self._ray.get([a.version.remote() for a in self.actors], timeout=timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"ray rollout workers not up within {timeout:.0f}s") from None
        for i in range(self.n):
            th = threading.Thread(target=self._loop, args=(i,), daemon=True, name=f"ray-{i}")
            self._threads.append(th)
            th.start()

    def _loop(self, i: int) -> None:
        ray = self._ray
        while True:
            lease = self.orch.acquire(f"ray-{i}")
            if lease is None:
                return
            with self._lock:
                self._current[i] = lease
            try:
                trajs = ray.get(self.actors[i].run.remote(lease))
            except ray.exceptions.RayActorError as err:
                self.orch.fail(lease, f"ray worker {i} died: {str(err).splitlines()[0]}")
                self._revive(i)
                continue
            except ray.exceptions.RayTaskError as err:
                self.orch.fail(lease, f"ray worker {i}: {type(err.cause).__name__}: {err.cause}")
                continue
            except Exception as err:  # unreachable actor, lost object, ...: the job is retried
                # elsewhere instead of dying with this thread (a lost job would stall the batch)
                self.orch.fail(lease, f"ray worker {i}: {type(err).__name__}: {err}")
                continue
            finally:
                with self._lock:
                    self._current[i] = None
            self.orch.complete(lease, trajs)

    def _wait_up(self, actor: Any, timeout: float) -> int | None:
        """The actor's weight version once it answers (None: dead or not back in time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self._ray.get(actor.version.remote(), timeout=timeout)
            except self._ray.exceptions.ActorUnavailableError:
                time.sleep(0.5)  # still restarting
            except Exception:
                return None
        return None

    def _revive(self, i: int, timeout: float = 600.0) -> None:
        """Wait for Ray to restart actor `i` (other workers take the failed job meanwhile),
        then reload the latest weights: a restarted actor has the initial ones."""
        self.restarts += 1
        if self._wait_up(self.actors[i], timeout) is not None and self._weights is not None:
            ref, version = self._weights
            try:
                self._ray.get(self.actors[i].load_weights.remote(ref, version), timeout=timeout)
            except Exception:
                pass  # down again: its next job fails and is retried elsewhere

    def versions(self, timeout: float = 600.0) -> list[int | None]:
        """Each actor's weight version (waiting for restarting ones; None when dead)."""
        return [self._wait_up(a, timeout) for a in self.actors]

    def current(self, i: int) -> Lease | None:
        with self._lock:
            return self._current.get(i)

    def kill(self, i: int) -> Lease | None:
        """Kill worker actor `i`'s process (Ray restarts it); its job is retried elsewhere."""
        lease = self.current(i)
        self._ray.kill(self.actors[i], no_restart=False)
        return lease

    def push_weights(
        self, state_dict: dict[str, torch.Tensor], version: int, timeout: float
    ) -> float:
        """Load `state_dict` into every actor as `version`, within `timeout` seconds."""
        t0 = time.monotonic()
        ref = self._ray.put({k: v.detach().cpu() for k, v in state_dict.items()})
        self._weights = (ref, version)  # first: an actor being revived now picks these up
        refs = [a.load_weights.remote(ref, version) for a in self.actors]
        ready, pending = self._ray.wait(refs, num_returns=len(refs), timeout=timeout)
        if pending:
            hung = [i for i, r in enumerate(refs) if r in pending]
            raise WeightSyncTimeout(
                f"weight sync of version {version} did not finish within "
                f"{timeout:.1f}s on ray worker(s) {hung}"
            )
        for actor, r in zip(self.actors, refs):
            try:
                self._ray.get(r)
            except self._ray.exceptions.ActorUnavailableError:  # restarting: load once it is up
                left = max(1.0, timeout - (time.monotonic() - t0))
                if self._wait_up(actor, left) is not None:
                    self._ray.get(actor.load_weights.remote(ref, version), timeout=left)
            except self._ray.exceptions.RayActorError:
                pass  # dead: if Ray brings it back, _revive loads these weights into it
        self.orch.set_version(version)
        return time.monotonic() - t0

    def stop(self, timeout: float = 30.0) -> None:
        """Close the orchestrator, end the actors (episodes in flight are dropped), join."""
        self.orch.close()
        for a in self.actors:
            self._ray.kill(a, no_restart=True)
        deadline = time.monotonic() + timeout
        for th in self._threads:
            th.join(max(0.0, deadline - time.monotonic()))
