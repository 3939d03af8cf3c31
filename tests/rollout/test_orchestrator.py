"""The rollout orchestrator: mixture quotas, admission (sync = tau 0, K 1), staleness drops,
retries without loss or double delivery, checkpoint state, and real worker threads running a
tiny model against environments with skewed latencies, crashes and a killed worker."""

from __future__ import annotations

import threading
import time

import pytest
from tiny_models import end_biased_nano
from worker_runs import running

from arcforge.envs.base import StepResult
from arcforge.errors import ConfigError
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.envservice import local_service
from arcforge.rollout.orchestrator import (
    Group,
    GroupBatch,
    Mixture,
    Orchestrator,
    OrchestratorSettings,
    PoolFailing,
)
from arcforge.rollout.workers import LocalWorkers
from arcforge.types import Message, Reward, Segment, Task, Trajectory
from arcforge.world import WorldConfig, build_world


class SleepEnv:
    """A tool-less test environment: each step takes `delay` s; done after `turns` replies."""

    open_now = {}  # kind -> environments open at this moment
    peak = {}  # kind -> most open at once
    lock = threading.Lock()

    def __init__(
        self,
        kind: str,
        delay: float,
        turns: int = 2,
        crash: bool = False,
        crash_on_reset: bool = False,
    ) -> None:
        self.kind, self.delay, self.turns, self.crash, self.steps = kind, delay, turns, crash, 0
        self.crash_on_reset = crash_on_reset
        self.tools = []

    def reset(self, task: Task) -> list[Message]:
        if self.crash_on_reset:  # before any reply: no episode can end without the crash
            raise OSError("sandbox died")
        with SleepEnv.lock:
            SleepEnv.open_now[self.kind] = SleepEnv.open_now.get(self.kind, 0) + 1
            SleepEnv.peak[self.kind] = max(
                SleepEnv.peak.get(self.kind, 0), SleepEnv.open_now[self.kind]
            )
        return [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        time.sleep(self.delay)
        if self.crash:
            raise OSError("sandbox died")
        self.steps += 1
        return StepResult([Message("user", "go on")], done=self.steps >= self.turns)

    def verify(self) -> Reward:
        return Reward(float(self.steps % 2), {"steps": self.steps})

    def close(self) -> None:
        if self.crash_on_reset:  # never opened
            return
        with SleepEnv.lock:
            SleepEnv.open_now[self.kind] -= 1


def tasks(kind: str, n: int) -> list[Task]:
    return [Task(f"{kind}-{i}", kind, f"Task {i} of kind {kind}.") for i in range(n)]


@pytest.fixture(scope="module")
def tok():
    world = build_world(WorldConfig(seed=7, scale=0.1))
    return train_tokenizer([d.text for d in world.corpus()[:200]], vocab_size=400)


@pytest.fixture(scope="module")
def model(tok):
    """A random nano model whose <|end|> logit is biased: short replies (a few tokens)."""
    return end_biased_nano(tok).eval()


@pytest.fixture
def engine(tok, model):
    return LocalEngine(model, pad_token_id=tok.pad_token_id)


CFG = AgentConfig(max_turns=4, max_new_tokens=16, context_budget=512)


def _group(job_id: int, kind: str, version: int) -> Group:
    seg = Segment([5, 6], "model", [1, 1], [-1.0, -1.0], version)
    return Group(job_id, kind, f"t{job_id}", [Trajectory([seg], task_id=f"t{job_id}")], version)


def test_mixture_quotas_and_tolerance():
    assert Mixture({"swe": 1, "search": 1}).quotas(4) == {"swe": 2, "search": 2}
    # 10 * (0.5, 0.3, 0.2) = (5, 3, 2) exactly
    assert Mixture({"a": 5, "b": 3, "c": 2}).quotas(10) == {"a": 5, "b": 3, "c": 2}
    # 4 groups cannot hold thirds: best split (2, 1, 1) misses 1/3 by 0.167 > 0.05
    with pytest.raises(ConfigError, match="cannot hold the mixture"):
        Mixture({"a": 1, "b": 1, "c": 1}).quotas(4)
    assert Mixture({"a": 1, "b": 1, "c": 1}, tolerance=0.2).quotas(4) == {"a": 2, "b": 1, "c": 1}


def test_a_pool_of_several_kinds_runs_each_task_on_its_kinds_service():
    mixed = tasks("math", 2) + tasks("search", 2)  # e.g. one synthesized jsonl source
    orch = Orchestrator(
        {"mixed": mixed, "math": tasks("math", 2)},
        OrchestratorSettings(Mixture({"mixed": 1, "math": 1}), 2, tau=1),
    )
    for kind in ("math", "search"):
        orch.register(local_service(kind, [kind], lambda t: SleepEnv(t.kind, 0)))
    leases = [orch.acquire(timeout=0.1) for _ in range(4)]  # cap: 2 per pool at tau = 1
    assert sorted(x.pool for x in leases) == ["math", "math", "mixed", "mixed"]
    assert all(x.service.name == x.task.kind for x in leases)
    assert orch.acquire(timeout=0.05) is None


def test_batch_carries_its_group_size_and_refuses_groups_of_another():
    orch = Orchestrator({"math": tasks("math", 3)}, OrchestratorSettings(Mixture({"math": 1}), 1))
    orch.inject(_group(0, "math", version=0))
    assert orch.next_batch(timeout=1).group_size == 1
    with pytest.raises(ValueError, match=r"group_size 2 holds groups of \[1\] episodes"):
        GroupBatch([_group(1, "math", version=0)], version=0, group_size=2)


def test_injected_stale_group_is_dropped_and_counted():
    orch = Orchestrator(
        {"math": tasks("math", 3)}, OrchestratorSettings(Mixture({"math": 1}), 1, tau=1)
    )
    orch.set_version(3)
    orch.inject(_group(0, "math", version=1))  # 3 - 1 = 2 > tau: over-stale
    orch.inject(_group(1, "math", version=2))  # 3 - 2 = 1 <= tau
    batch = orch.next_batch(timeout=1)
    assert [g.job_id for g in batch.groups] == [1] and batch.dropped_stale == 1
    assert orch.counts["dropped_stale"] == 1 and orch.stats()["buffered"] == 0
    with pytest.raises(TimeoutError, match="no batch within"):
        orch.next_batch(timeout=0.05)


def test_tau0_k1_admits_exactly_one_batch_per_version():
    svc = local_service("s", ["math"], lambda t: SleepEnv("math", 0), max_concurrency=8)
    orch = Orchestrator(
        {"math": tasks("math", 5)}, OrchestratorSettings(Mixture({"math": 1}), 2, tau=0)
    )
    orch.register(svc)
    a, b = orch.acquire(timeout=0.1), orch.acquire(timeout=0.1)
    assert a and b and orch.acquire(timeout=0.05) is None  # cap = 2 groups at version 0
    for lease in (a, b):
        orch.complete(lease, [Trajectory([], task_id=lease.task.id)])
    assert len(orch.next_batch(timeout=1).groups) == 2
    assert orch.acquire(timeout=0.05) is None  # consumed, but the weights are not pushed yet
    orch.set_version(1)
    assert orch.acquire(timeout=0.1) is not None
    # tau = 1, K = 2: (0 + 1 + 1) * 2 = 4 batches of one group may start at version 0
    loose = Orchestrator(
        {"math": tasks("math", 9)},
        OrchestratorSettings(Mixture({"math": 1}), 1, tau=1, sync_every=2),
    )
    loose.register(svc)
    assert sum(loose.acquire(timeout=0.05) is not None for _ in range(6)) == 4


def test_failed_job_is_retried_elsewhere_and_late_results_are_discarded():
    orch = Orchestrator(
        {"math": tasks("math", 4)}, OrchestratorSettings(Mixture({"math": 1}), 1, max_retries=1)
    )
    for name in ("a", "b"):
        orch.register(local_service(name, ["math"], lambda t: SleepEnv("math", 0)))
    first = orch.acquire(timeout=0.1)
    orch.fail(first, "env crashed")
    retry = orch.acquire(timeout=0.1)
    assert retry.job_id == first.job_id and retry.attempt == 1
    assert retry.service.name != first.service.name  # elsewhere
    traj = [Trajectory([], task_id=first.task.id)]
    assert orch.complete(first, traj) is False  # the superseded attempt comes back: ignored
    assert orch.complete(retry, traj) is True
    assert orch.counts["discarded_results"] == 1 and orch.counts["retries"] == 1
    assert [g.task_id for g in orch.next_batch(timeout=1).groups] == [first.task.id]
    # beyond max_retries the job is recorded as failed, never silently lost
    orch.set_version(1)
    lease = orch.acquire(timeout=0.1)
    orch.fail(lease, "boom 1")
    orch.fail(orch.acquire(timeout=0.1), "boom 2")
    assert orch.failed[0]["task_id"] == lease.task.id and orch.failed[0]["errors"] == [
        "boom 1",
        "boom 2",
    ]


def test_state_restore_keeps_versions_buffer_and_pending_jobs():
    pools = {"math": tasks("math", 6)}
    orch = Orchestrator(pools, OrchestratorSettings(Mixture({"math": 1}), 2, tau=1))
    orch.register(local_service("s", ["math"], lambda t: SleepEnv("math", 0)))
    orch.set_version(4)
    in_flight = orch.acquire(timeout=0.1)
    orch.inject(_group(99, "math", version=3))
    state = orch.state()
    again = Orchestrator(pools, OrchestratorSettings(Mixture({"math": 1}), 2, tau=1))
    again.register(local_service("s", ["math"], lambda t: SleepEnv("math", 0)))
    again.restore(state)
    assert again.version == 4 and again.cursor == orch.cursor
    redo = again.acquire(timeout=0.1)  # the job that was running is redone, not lost
    assert (redo.job_id, redo.task.id) == (in_flight.job_id, in_flight.task.id)
    again.set_version(5)  # the restored group (w0 = 3) is now 2 versions old: over tau = 1
    again.complete(redo, [Trajectory([], task_id=redo.task.id)])
    with pytest.raises(TimeoutError):
        again.next_batch(timeout=0.05)
    assert again.counts["dropped_stale"] == 1


def test_worker_killed_mid_episode_yields_exactly_one_trajectory_per_task(tok, engine):
    pool = tasks("math", 6)
    orch = Orchestrator(
        {"math": pool}, OrchestratorSettings(Mixture({"math": 1}), 6, group_size=1, tau=0)
    )
    orch.register(local_service("s", ["math"], lambda t: SleepEnv("math", 0.3, turns=2)))
    workers = LocalWorkers(orch, engine, tok, CFG, n=2)
    with running(workers):
        deadline = time.monotonic() + 20
        while workers.current(0) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        killed = workers.kill(0)
        assert killed is not None  # it was mid-episode
        batch = orch.next_batch(timeout=60)
    assert sorted(g.task_id for g in batch.groups) == sorted(t.id for t in pool)
    assert orch.counts["retries"] == 1 and orch.counts["discarded_results"] == 1
    retried = next(g for g in batch.groups if g.task_id == killed.task.id)
    assert retried.attempts == 2 and len(retried.trajectories) == 1


def test_environment_crash_is_retried_on_another_service(tok, engine):
    pool = tasks("math", 4)
    orch = Orchestrator(
        {"math": pool}, OrchestratorSettings(Mixture({"math": 1}), 4, group_size=2, max_retries=2)
    )
    orch.register(local_service("broken", ["math"], lambda t: SleepEnv("math", 0, crash=True)))
    orch.register(local_service("good", ["math"], lambda t: SleepEnv("math", 0)))
    with running(LocalWorkers(orch, engine, tok, CFG, n=2)):
        batch = orch.next_batch(timeout=60)
    assert sorted(g.task_id for g in batch.groups) == sorted(t.id for t in pool)
    assert orch.counts["retries"] >= 1 and not orch.failed
    assert all(t.finish_reason != "error" for t in batch.trajectories)
    assert all(len(g.trajectories) == 2 for g in batch.groups)


def test_a_pool_whose_environment_always_fails_stops_the_wait_with_its_error(tok, engine):
    """One kind's environment crashes on every episode (a tool missing on this machine): the
    trainer's wait ends after `max_pool_failures` lost jobs, naming the pool and the error,
    instead of starving the mixture until the batch timeout."""
    orch = Orchestrator(
        {"math": tasks("math", 20), "swe": tasks("swe", 20)},
        OrchestratorSettings(Mixture({"math": 1, "swe": 1}), 2, max_retries=1, max_pool_failures=3),
    )
    orch.register(local_service("m", ["math"], lambda t: SleepEnv("math", 0)))
    # crashing at reset: a crash in step() is skipped when the random policy's first reply
    # ends the episode by itself (it made this test flaky under load)
    orch.register(local_service("s", ["swe"], lambda t: SleepEnv("swe", 0, crash_on_reset=True)))
    workers = LocalWorkers(orch, engine, tok, CFG, n=2)
    with running(workers):
        t0 = time.monotonic()
        with pytest.raises(PoolFailing, match=r"pool 'swe': [345] jobs in a row.*sandbox died"):
            orch.next_batch(timeout=120)
    assert time.monotonic() - t0 < 60
    assert {f["pool"] for f in orch.failed} == {"swe"} and len(orch.failed) >= 3
    assert len(orch.failed) <= 3 + 2  # a broken pool takes no new jobs (2 workers in flight)
    assert all(len(f["errors"]) == 2 for f in orch.failed)  # max_retries 1: two attempts each


def test_mixture_ratios_hold_under_tenfold_latency_skew(tok, model, engine):
    SleepEnv.peak.clear()
    pools = {"math": tasks("math", 40), "search": tasks("search", 40)}
    orch = Orchestrator(pools, OrchestratorSettings(Mixture({"math": 1, "search": 1}), 4, tau=2))
    orch.register(local_service("fast", ["math"], lambda t: SleepEnv("math", 0.02), 8))
    orch.register(local_service("slow", ["search"], lambda t: SleepEnv("search", 0.2), 8))
    workers = LocalWorkers(orch, engine, tok, CFG, n=6)
    with running(workers):
        kinds = []
        for v in range(1, 5):
            batch = orch.next_batch(timeout=60)
            kinds.append(sorted(g.pool for g in batch.groups))
            assert all(v - 1 - g.start_version <= 2 for g in batch.groups)
            workers.push_weights(model.state_dict(), v, timeout=30)
    assert kinds == [["math", "math", "search", "search"]] * 4
    # the slow kind got the concurrency: more of its episodes ran at once
    assert SleepEnv.peak["search"] > SleepEnv.peak["math"]


def test_partial_rollout_continues_across_a_weight_push(tok, model, engine):
    orch = Orchestrator(
        {"math": tasks("math", 2)}, OrchestratorSettings(Mixture({"math": 1}), 1, tau=1)
    )
    orch.register(local_service("s", ["math"], lambda t: SleepEnv("math", 0.5, turns=3)))
    workers = LocalWorkers(orch, engine, tok, CFG, n=1)
    with running(workers):
        deadline = time.monotonic() + 20
        while workers.gateway.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.005)  # the first reply is sampled; the environment is now stepping
        workers.push_weights(model.state_dict(), 1, timeout=30)
        batch = orch.next_batch(timeout=30)
    group = batch.groups[0]
    versions = [s.policy_version for s in group.trajectories[0].segments if s.source == "model"]
    assert versions == [0, 1, 1] and group.start_version == 0


def _scored(lease, rewards) -> list[Trajectory]:
    return [Trajectory([], reward=r, task_id=lease.task.id) for r in rewards]


def test_dynamic_sampling_drops_uniform_groups_and_refills_their_slots():
    """max_refill_tries 2: a group whose rewards are all equal is dropped and a fresh task
    takes its slot, at most twice in a row per pool; the third is kept, so a pool without
    signal still delivers. Streaks and counts survive state() / restore()."""
    pools = {"math": tasks("math", 20), "swe": tasks("swe", 20)}
    mix = Mixture({"math": 1, "swe": 1})

    def fresh() -> Orchestrator:
        o = Orchestrator(
            pools, OrchestratorSettings(mix, 2, group_size=2, tau=0, max_refill_tries=2)
        )
        for kind in pools:
            o.register(local_service(kind, [kind], lambda t: SleepEnv(t.kind, 0), 8))
        return o

    orch = fresh()
    math, swe = orch.acquire(timeout=0.1), orch.acquire(timeout=0.1)
    assert {math.pool, swe.pool} == {"math", "swe"} and orch.acquire(timeout=0.05) is None
    assert orch.complete(math, _scored(math, [0.0, 0.0]))  # uniform: dropped ...
    assert orch.ready()["math"] == 0
    again = orch.acquire(timeout=0.1)  # ... and its slot refilled with the pool's next task
    assert again.pool == "math" and again.task.id != math.task.id
    orch.complete(again, _scored(again, [1.0, 1.0]))  # the second uniform group in a row
    third = orch.acquire(timeout=0.1)
    state = orch.state()  # two dropped in a row: the next uniform math group is kept
    orch.complete(third, _scored(third, [0.0, 0.0]))
    orch.complete(swe, _scored(swe, [0.0, 1.0]))  # a signal group: kept, resets its streak
    batch = orch.next_batch(timeout=1)
    assert sorted(g.task_id for g in batch.groups) == sorted([third.task.id, swe.task.id])
    assert orch.stats()["dropped_uniform"] == 2 and orch.uniform_by_pool == {"math": 2, "swe": 0}
    assert orch.counts["completed"] == 4

    resumed = fresh()
    resumed.restore(state)
    redone = [resumed.acquire(timeout=0.1) for _ in range(2)]  # the jobs that were running
    redo = next(x for x in redone if x.pool == "math")
    assert redo.task.id == third.task.id  # ... and the math pool's streak of two drops
    resumed.complete(redo, _scored(redo, [0.0, 0.0]))
    assert resumed.ready()["math"] == 1 and resumed.uniform_by_pool["math"] == 2
    # without refills every group is kept, uniform or not
    plain = Orchestrator(pools, OrchestratorSettings(mix, 2, group_size=2, tau=0))
    plain.register(local_service("m", ["math"], lambda t: SleepEnv("math", 0), 8))
    lease = plain.acquire(timeout=0.1)
    plain.complete(lease, _scored(lease, [0.0, 0.0]))
    assert plain.ready()["math"] == 1 and plain.stats()["dropped_uniform"] == 0
    with pytest.raises(ConfigError, match="max_refill_tries"):
        Orchestrator(pools, OrchestratorSettings(mix, 2, group_size=1, max_refill_tries=1))
