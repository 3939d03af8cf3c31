"""The multi-task rollout orchestrator: environment services, mixture control, staleness, retries.

GLM-5 decouples rollout from training around a central orchestrator to which every task family
registers as a service. This one is the bookkeeping core shared by every backend (threads in
process, Ray actors): rollout workers `acquire` a job (a task to run `group_size` episodes of,
on a service with free slots), run it with the agent loop, and report `complete` (a group of
TITO Trajectories) or `fail`; the trainer takes batches with `next_batch` and announces each new
weight version with `set_version`.

Mixture control. Tasks come in pools (mixture components: usually one task kind each, e.g.
"swe", "terminal", "search"; a pool may also be one source holding several kinds). Each batch
holds exactly `quota_k` groups of pool k (largest-remainder rounding of the target weights; the
constructor refuses a batch size whose rounding misses a weight by more than `tolerance`). Jobs
are dispatched to the pool whose in-pipeline count (buffered + running + queued) is lowest
relative to its quota, so a pool whose episodes take ten times longer simply gets ten times more
concurrent jobs, and fast pools wait in the buffer. A job runs on a service serving its task's
kind.

Staleness. A job may start only while its pool is below its admission cap
    consumed_k + live_k < quota_k * ((version + tau + 1) * sync_every - batches)   [per pool]
i.e. no more is generated ahead than the trainer can consume before the version moves more than
tau past it. tau = 0 and sync_every = 1 is therefore exactly synchronous RL (generate one batch,
train, push, repeat). At delivery a group whose start version w0 (its oldest model segment) has
`version - w0 > tau` is dropped and counted, and its slot is refilled.

Reliability. A failed job (a worker or environment crash: `fail`, or a Trajectory finished with
"error") is queued again at the front, preferring a service it has not failed on, up to
`max_retries` times; then it is recorded in `failed` (never silently lost). Workers hold a
`Lease` (job id + attempt): a result from a superseded attempt (a worker declared dead that
comes back) is discarded, so nothing is delivered twice. `state()` / `restore()` capture the
version, batch count, task cursors, buffered groups (with their versions) and the jobs still
pending, so a resumed run redoes exactly the unfinished jobs and judges staleness as before.

Dynamic sampling (DAPO; `max_refill_tries` > 0). A group whose episodes all got one reward has
a zero GRPO advantage: it costs a batch slot and teaches nothing. Such a group is dropped on
arrival (counted per pool in `uniform_by_pool`, in all as `dropped_uniform` in `stats()`) and
its slot refilled by the admission rule above, since a dropped group no longer counts as live.
A pool may drop at most `max_refill_tries` such groups in a row; the next one is kept, so a
pool that never gives signal (a task kind the policy always fails) costs at most
`max_refill_tries + 1` jobs per delivered group and cannot stall the mixture. The streaks are
part of `state()`.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from random import Random
from typing import Any

from arcforge.errors import ConfigError, UserError
from arcforge.rollout.envservice import EnvService
from arcforge.types import Task, Trajectory


class OrchestratorClosed(RuntimeError):
    """The orchestrator was closed while a caller waited on it."""


@dataclass(frozen=True)
class Mixture:
    """Target share of each pool in a batch; `tolerance` is the largest allowed deviation."""

    weights: dict[str, float]
    tolerance: float = 0.05

    def quotas(self, groups: int) -> dict[str, int]:
        """Groups of each pool in a batch of `groups` (largest remainder); ConfigError when the
        rounding misses a weight by more than the tolerance."""
        if not self.weights or any(w <= 0 for w in self.weights.values()):
            raise ConfigError(f"mixture weights must be positive, got {self.weights}")
        total = sum(self.weights.values())
        share = {k: w / total for k, w in self.weights.items()}
        exact = {k: s * groups for k, s in share.items()}
        q = {k: int(x) for k, x in exact.items()}
        by_remainder = sorted(exact, key=lambda k: exact[k] - q[k], reverse=True)
        for k in by_remainder[: groups - sum(q.values())]:
            q[k] += 1
        worst = max(abs(q[k] / groups - share[k]) for k in q)
        if worst > self.tolerance + 1e-9 or min(q.values()) == 0:
            raise ConfigError(
                f"a batch of {groups} groups cannot hold the mixture {share} within "
                f"{self.tolerance} (best split {q}); use a batch size that fits the weights"
            )
        return q


@dataclass(frozen=True)
class OrchestratorSettings:
    """How the orchestrator batches, admits and retries jobs (see the module docstring).

    Args:
        mixture: target share per pool (pools absent from it are not dispatched).
        groups_per_batch: groups in each delivered batch.
        group_size: episodes per job (a GRPO group); every delivered `GroupBatch` carries it.
        tau: the largest allowed version - start_version of a delivered group.
        sync_every: trainer steps (batches) per weight version.
        max_retries: retries of a failed job before it is recorded as failed.
        seed: the task streams' seed.
        max_pool_failures: jobs of one pool that may fail for good in a row (no group of that
            pool delivered in between) before `next_batch` gives up with `PoolFailing`: an
            environment that fails every episode (a tool missing on this machine, a broken
            service) would otherwise starve the mixture until `batch_timeout`.
        max_refill_tries: dynamic sampling (see the module docstring); 0 keeps every group.
    """

    mixture: Mixture
    groups_per_batch: int
    group_size: int = 1
    tau: int = 0
    sync_every: int = 1
    max_retries: int = 2
    seed: int = 0
    max_pool_failures: int = 8
    max_refill_tries: int = 0

    def __post_init__(self) -> None:
        if (
            self.tau < 0
            or self.sync_every < 1
            or self.group_size < 1
            or self.max_retries < 0
            or self.max_pool_failures < 1
        ):
            raise ConfigError(
                "need tau >= 0, sync_every >= 1, group_size >= 1, max_retries >= 0, "
                "max_pool_failures >= 1"
            )
        if self.max_refill_tries < 0 or (self.max_refill_tries and self.group_size < 2):
            raise ConfigError(
                f"max_refill_tries {self.max_refill_tries}: needs >= 0, and groups of "
                f"at least 2 episodes to tell a uniform group (group_size "
                f"{self.group_size})"
            )


@dataclass(frozen=True)
class Lease:
    """What a worker gets: run `group_size` episodes of `task` on `service`."""

    job_id: int
    attempt: int
    pool: str
    task: Task
    service: EnvService
    group_size: int
    start_version: int


@dataclass
class Group:
    """The delivered result of one job: `group_size` trajectories of one task."""

    job_id: int
    pool: str
    task_id: str
    trajectories: list[Trajectory]
    start_version: int  # the oldest weight version any model token of the group came from
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "pool": self.pool,
            "task_id": self.task_id,
            "trajectories": [t.to_dict() for t in self.trajectories],
            "start_version": self.start_version,
            "attempts": self.attempts,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Group:
        trajs = [Trajectory.from_dict(t) for t in d["trajectories"]]
        return cls(d["job_id"], d["pool"], d["task_id"], trajs, d["start_version"], d["attempts"])


@dataclass
class GroupBatch:
    """What the trainer gets: the groups (quota per pool), the version they were judged at, and
    the episodes per group, which every group holds (checked here: the trainer's advantages
    read the trajectories `group_size` at a time)."""

    groups: list[Group]
    version: int
    group_size: int
    dropped_stale: int = 0  # groups dropped as over-stale while this batch was assembled

    def __post_init__(self) -> None:
        sizes = sorted({len(g.trajectories) for g in self.groups} - {self.group_size})
        if sizes:
            raise ValueError(
                f"a batch of group_size {self.group_size} holds groups of {sizes} episodes"
            )

    @property
    def trajectories(self) -> list[Trajectory]:
        return [t for g in self.groups for t in g.trajectories]


@dataclass
class _Job:
    id: int
    pool: str
    task: Task
    attempt: int = 0
    lease: Lease | None = None
    failed_on: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class PoolFailing(UserError):
    """Every recent job of one pool failed for good: its environment is broken here."""


def episode_error(trajs: list[Trajectory]) -> str | None:
    """The environment error of the first trajectory that finished with "error", if any."""
    for t in trajs:
        if t.finish_reason == "error":
            return str(t.reward_details.get("error", "environment error"))
    return None


class Orchestrator:
    """See the module docstring.

    Args:
        pools: pool name -> its tasks (each pool's stream is a seeded permutation per epoch).
        settings: the mixture, batch and group sizes, staleness, retries and refills.
    """

    def __init__(self, pools: dict[str, list[Task]], settings: OrchestratorSettings) -> None:
        self.quotas = settings.mixture.quotas(settings.groups_per_batch)
        missing = sorted(k for k in self.quotas if not pools.get(k))
        if missing:
            raise ConfigError(f"the mixture names pool(s) {missing} with no tasks")
        self.pools, self.settings = pools, settings
        self.group_size = settings.group_size
        self._uniform_streak = {k: 0 for k in self.quotas}  # uniform groups dropped in a row
        self.uniform_by_pool = {k: 0 for k in self.quotas}
        self._streak = {k: 0 for k in self.quotas}  # failed-for-good jobs in a row per pool
        self.services: list[EnvService] = []
        self._cv = threading.Condition()
        self._used: dict[str, int] = {}
        self._queue: deque[_Job] = deque()
        self._inflight: dict[int, _Job] = {}
        self._buffer: list[Group] = []
        self._perm: dict[tuple[str, int], list[int]] = {}
        self._closed = False
        self.version, self.batches, self.next_id = 0, 0, 0
        self.cursor = {k: 0 for k in self.quotas}
        self.failed: list[dict[str, Any]] = []
        self.counts = {
            "dispatched": 0,
            "completed": 0,
            "retries": 0,
            "failed": 0,
            "dropped_stale": 0,
            "discarded_results": 0,
        }

    # ---- registration -------------------------------------------------------------------

    def register(self, service: EnvService) -> None:
        """Add an environment service; its slots are `max_concurrency` episodes."""
        if service.max_concurrency < self.group_size:
            raise ConfigError(
                f"service {service.name!r}: max_concurrency "
                f"{service.max_concurrency} < group_size {self.group_size}"
            )
        with self._cv:
            if any(s.name == service.name for s in self.services):
                raise ConfigError(f"a service named {service.name!r} is already registered")
            self.services.append(service)
            self._used[service.name] = 0
            self._cv.notify_all()

    def check_services(self) -> None:
        """ConfigError naming every task kind of the mixture's pools that no service serves."""
        kinds = sorted({t.kind for p in self.quotas for t in self.pools[p]})
        missing = [k for k in kinds if not any(k in s.kinds for s in self.services)]
        if missing:
            names = {s.name: s.kinds for s in self.services}
            raise ConfigError(f"no environment service serves kind(s) {missing}; services: {names}")

    # ---- worker side --------------------------------------------------------------------

    def acquire(self, worker: str = "", timeout: float | None = None) -> Lease | None:
        """Block until a job may start; None when closed (or after `timeout` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._closed:
                lease = self._pick()
                if lease is not None:
                    return lease
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cv.wait(left)
            return None

    def complete(self, lease: Lease, trajectories: list[Trajectory]) -> bool:
        """Deliver a job's group into the buffer; False when the lease is stale (discarded)."""
        err = episode_error(trajectories)
        if err is not None:
            self.fail(lease, err)
            return False
        with self._cv:
            job = self._take(lease)
            if job is None:
                self.counts["discarded_results"] += 1
                return False
            self._streak[job.pool] = 0  # the pool's environment works
            self.counts["completed"] += 1
            if self._drop_uniform(job.pool, trajectories):
                self._cv.notify_all()  # its slot is free: a fresh job may start
                return True
            for t in trajectories:
                t.group_id = f"{lease.task.id}#{lease.job_id}"
            started = [
                t.start_version
                for t in trajectories
                if any(s.source == "model" for s in t.segments)
            ]
            start = min(started) if started else lease.start_version
            self._buffer.append(
                Group(job.id, job.pool, job.task.id, list(trajectories), start, job.attempt + 1)
            )
            self._cv.notify_all()
            return True

    def _drop_uniform(self, pool: str, trajectories: list[Trajectory]) -> bool:
        """Dynamic sampling: whether to drop this group (all rewards equal, streak allows)."""
        if not self.settings.max_refill_tries or len({t.reward for t in trajectories}) > 1:
            self._uniform_streak[pool] = 0
            return False
        if self._uniform_streak[pool] >= self.settings.max_refill_tries:
            self._uniform_streak[pool] = 0  # kept: the pool gives no signal at the moment
            return False
        self._uniform_streak[pool] += 1
        self.uniform_by_pool[pool] += 1
        return True

    def fail(self, lease: Lease, reason: str) -> None:
        """A worker or environment crashed on `lease`: retry it elsewhere (bounded)."""
        with self._cv:
            job = self._take(lease)
            if job is None:
                return
            job.failed_on.append(lease.service.name)
            job.errors.append(reason)
            if job.attempt >= self.settings.max_retries:
                self._streak[job.pool] = self._streak.get(job.pool, 0) + 1
                self.counts["failed"] += 1
                self.failed.append(
                    {
                        "job_id": job.id,
                        "task_id": job.task.id,
                        "pool": job.pool,
                        "errors": list(job.errors),
                    }
                )
            else:
                job.attempt += 1
                self.counts["retries"] += 1
                self._queue.appendleft(job)
            self._cv.notify_all()

    def _take(self, lease: Lease) -> _Job | None:
        job = self._inflight.get(lease.job_id)
        if job is None or job.attempt != lease.attempt:
            return None
        del self._inflight[lease.job_id]
        self._used[lease.service.name] -= self.group_size
        job.lease = None
        return job

    # ---- dispatch -----------------------------------------------------------------------

    def _live(self, pool: str) -> int:
        jobs = list(self._inflight.values()) + list(self._queue)
        return sum(g.pool == pool for g in self._buffer) + sum(j.pool == pool for j in jobs)

    def _room(self, pool: str) -> bool:
        tau, sync_every = self.settings.tau, self.settings.sync_every
        cap = self.quotas[pool] * ((self.version + tau + 1) * sync_every - self.batches)
        return self._live(pool) < cap

    def _service(self, kind: str, avoid: list[str]) -> EnvService | None:
        serving = [s for s in self.services if kind in s.kinds]
        fresh = [s for s in serving if s.name not in avoid] or serving  # "elsewhere" if possible
        free = [s for s in fresh if self._used[s.name] + self.group_size <= s.max_concurrency]
        return min(free, key=lambda s: self._used[s.name], default=None)

    def _start(self, job: _Job, service: EnvService) -> Lease:
        self._used[service.name] += self.group_size
        job.lease = Lease(
            job.id, job.attempt, job.pool, job.task, service, self.group_size, self.version
        )
        self._inflight[job.id] = job
        self.counts["dispatched"] += 1
        return job.lease

    def _peek(self, pool: str) -> Task:
        """The pool's next task (its cursor moves only when a job takes it)."""
        tasks = self.pools[pool]
        epoch, j = divmod(self.cursor[pool], len(tasks))
        key = (pool, epoch)
        if key not in self._perm:
            self._perm = {k: v for k, v in self._perm.items() if k[0] != pool}
            order = list(range(len(tasks)))
            seed = self.settings.seed * 1_000_003 + epoch * 7919 + zlib.crc32(pool.encode())
            Random(seed).shuffle(order)
            self._perm[key] = order
        return tasks[self._perm[key][j]]

    def _pick(self) -> Lease | None:
        for job in list(self._queue):  # retries and restored jobs first: already admitted
            svc = self._service(job.task.kind, job.failed_on)
            if svc is not None:
                self._queue.remove(job)
                return self._start(job, svc)
        order = sorted(self.quotas, key=lambda k: self._live(k) / self.quotas[k])
        for pool in order:
            # a broken pool takes no new jobs: next_batch is about to raise PoolFailing
            if not self._room(pool) or self._streak[pool] >= self.settings.max_pool_failures:
                continue
            task = self._peek(pool)
            svc = self._service(task.kind, [])
            if svc is not None:
                job = _Job(self.next_id, pool, task)
                self.next_id, self.cursor[pool] = self.next_id + 1, self.cursor[pool] + 1
                return self._start(job, svc)
        return None

    # ---- trainer side -------------------------------------------------------------------

    def set_version(self, version: int) -> None:
        """The engines now hold weight `version`: admission moves on, staleness is judged here."""
        with self._cv:
            self.version = version
            self._cv.notify_all()

    def _drop_stale(self) -> int:
        stale = [g for g in self._buffer if self.version - g.start_version > self.settings.tau]
        if stale:
            self._buffer = [g for g in self._buffer if g not in stale]
            self.counts["dropped_stale"] += len(stale)
            self._cv.notify_all()
        return len(stale)

    def _oldest_first(self, pool: str) -> list[Group]:
        groups = [g for g in self._buffer if g.pool == pool]
        return sorted(groups, key=lambda g: (g.start_version, g.job_id))

    def ready(self) -> dict[str, int]:
        """Buffered groups per pool (not yet judged for staleness)."""
        with self._cv:
            return {k: sum(g.pool == k for g in self._buffer) for k in self.quotas}

    def next_batch(self, timeout: float | None = None) -> GroupBatch:
        """Block until every pool has its quota of fresh groups; oldest groups go first.

        Raises:
            TimeoutError: after `timeout` seconds, saying what is buffered, running and failed.
            OrchestratorClosed: when closed while waiting.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        dropped = 0
        with self._cv:
            while True:
                dropped += self._drop_stale()
                self._check_streaks()
                have = {k: self._oldest_first(k) for k in self.quotas}
                if all(len(have[k]) >= q for k, q in self.quotas.items()):
                    groups = [g for k, q in self.quotas.items() for g in have[k][:q]]
                    batch = GroupBatch(groups, self.version, self.group_size, dropped)
                    taken = {id(g) for g in groups}
                    self._buffer = [g for g in self._buffer if id(g) not in taken]
                    self.batches += 1
                    self._cv.notify_all()
                    return batch
                if self._closed:
                    raise OrchestratorClosed("the orchestrator was closed")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"no batch within {timeout:.0f}s: buffered "
                        f"{ {k: len(v) for k, v in have.items()} } of quotas {self.quotas}, "
                        f"{len(self._inflight)} running, {len(self._queue)} queued, "
                        f"{len(self.failed)} failed, services {[s.name for s in self.services]}"
                    )
                self._cv.wait(left)

    def _check_streaks(self) -> None:
        broken = [k for k, n in self._streak.items() if n >= self.settings.max_pool_failures]
        if not broken:
            return
        pool = broken[0]
        last = next((f for f in reversed(self.failed) if f["pool"] == pool), {})
        errors = last.get("errors") or ["?"]
        raise PoolFailing(
            f"environment pool {pool!r}: {self._streak[pool]} jobs in a row failed on every "
            f"attempt ({self.settings.max_retries + 1} each), none delivered; "
            f"last error: {errors[-1]}"
        )

    def close(self) -> None:
        """Wake every waiter; acquire returns None and next_batch raises from now on."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    # ---- checkpoint ---------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """A JSON-able snapshot: versions, cursors, buffered groups, pending jobs, counters
        (values JSON cannot hold, e.g. in reward details, become strings)."""
        with self._cv:
            pending = list(self._inflight.values()) + list(self._queue)
            state = {
                "version": self.version,
                "batches": self.batches,
                "next_id": self.next_id,
                "cursor": dict(self.cursor),
                "counts": dict(self.counts),
                "failed": list(self.failed),
                "uniform_streak": dict(self._uniform_streak),
                "uniform_by_pool": dict(self.uniform_by_pool),
                "buffer": [g.to_dict() for g in self._buffer],
                "pending": [
                    {
                        "id": j.id,
                        "pool": j.pool,
                        "task": j.task.to_dict(),
                        "attempt": j.attempt,
                        "failed_on": j.failed_on,
                        "errors": j.errors,
                    }
                    for j in sorted(pending, key=lambda j: j.id)
                ],
            }
        return json.loads(json.dumps(state, default=str))

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from `state()`: pending jobs are queued again (their work is redone)."""
        with self._cv:
            self.version, self.batches = int(state["version"]), int(state["batches"])
            self.next_id = int(state["next_id"])
            self.cursor.update({k: int(v) for k, v in state["cursor"].items()})
            self.counts.update(state["counts"])
            self.failed = list(state["failed"])
            self._uniform_streak.update(state.get("uniform_streak", {}))  # optional in a state
            self.uniform_by_pool.update(state.get("uniform_by_pool", {}))
            self._buffer = [Group.from_dict(g) for g in state["buffer"]]
            self._inflight.clear()
            self._used = {k: 0 for k in self._used}
            self._queue = deque(
                _Job(
                    p["id"],
                    p["pool"],
                    Task.from_dict(p["task"]),
                    p["attempt"],
                    None,
                    list(p["failed_on"]),
                    list(p["errors"]),
                )
                for p in state["pending"]
            )
            self._cv.notify_all()

    def inject(self, group: Group) -> None:
        """Put an externally produced group into the buffer (replay, or a restored sample)."""
        with self._cv:
            self._buffer.append(group)
            self._cv.notify_all()

    def stats(self) -> dict[str, Any]:
        with self._cv:
            return {
                **self.counts,
                "dropped_uniform": sum(self.uniform_by_pool.values()),
                "buffered": len(self._buffer),
                "running": len(self._inflight),
                "queued": len(self._queue),
                "version": self.version,
            }
