"""The Ray backend on a local Ray cluster (`ray.init(num_cpus=2)`, no dashboard), in the default
suite: rollout workers and the environment host are Ray actors, a worker process is killed with
`ray.kill` while one of its episodes is open, and every task of the batch still yields exactly
one group of `group_size` trajectories: none lost, none twice, the killed attempt's output
nowhere. The environments are the in-process tool tasks (no sandbox), so the test takes seconds
beyond Ray's own start; tests/rollout/test_ray_backend.py (slow) adds sandboxed terminal tasks
and weight pushes into a restarted actor."""

from __future__ import annotations

import pytest
from tiny_models import end_biased_nano
from torch import nn
from worker_runs import kill_in_episode, running

from arcforge.envs.registry import env_factory
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings

ray = pytest.importorskip("ray")

N_TASKS, GROUP = 6, 2


def _policy(tok) -> nn.Module:
    """A random nano model whose head favours END a little, so episodes end within a few
    turns but not at once (the kill needs one to be open)."""
    return end_biased_nano(tok, end_bias=3.0)


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_killed_ray_worker_loses_and_duplicates_no_trajectory(world, tok):
    from arcforge.rollout.ray_backend import RayWorkers, init_ray, ray_env_service

    pool = world.tasks("tool")[:N_TASKS]
    init_ray(address=None, num_cpus=2)  # the stage's `ray_address: null`: a local cluster
    try:
        orch = Orchestrator(
            {"tool": pool}, OrchestratorSettings(Mixture({"tool": 1}), N_TASKS, group_size=GROUP)
        )
        envs = ray_env_service("tool", ["tool"], env_factory(world), 4)
        orch.register(envs)
        cfg = AgentConfig(max_turns=3, max_new_tokens=24, context_budget=1024)
        workers = RayWorkers(orch, _policy(tok), tok, cfg, 2, pad_token_id=tok.pad_token_id)
        with running(workers):
            killed = kill_in_episode(workers, envs, timeout=60, poll=0.02)
            batch = orch.next_batch(timeout=120)
    finally:
        ray.shutdown()

    assert killed is not None, "worker 0 never held a lease with an open episode"
    # none lost: every task of the pool is in the batch, each with a full group
    assert sorted(g.task_id for g in batch.groups) == sorted(t.id for t in pool)
    assert all(len(g.trajectories) == GROUP for g in batch.groups)
    assert not orch.failed
    # none duplicated: one group per job, trajectories are distinct records of their group
    assert len({g.job_id for g in batch.groups}) == N_TASKS
    trajs = batch.trajectories
    assert len(trajs) == N_TASKS * GROUP and len({id(t) for t in trajs}) == len(trajs)
    assert all(t.task_id == g.task_id for g in batch.groups for t in g.trajectories)
    # the killed attempt was retried and only the retry's group was delivered
    retried = next(g for g in batch.groups if g.job_id == killed.job_id)
    assert retried.attempts == killed.attempt + 2
    assert orch.counts["retries"] >= 1 and workers.restarts >= 1
    assert all(any(s.source == "model" for s in t.segments) for t in trajs)
