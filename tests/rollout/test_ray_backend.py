"""The Ray backend on a local CPU cluster: rollout workers and the environment host are actors
(real terminal tasks in bwrap sandboxes); a worker process killed mid-episode is restarted, its
job retried elsewhere, and every task still yields exactly one group; weight pushes reach every
actor."""

from __future__ import annotations

import pytest
from tiny_models import end_biased_nano
from worker_runs import kill_in_episode, running

from arcforge.envs.registry import env_factory
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.world import WorldConfig, build_world

ray = pytest.importorskip("ray")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here"),
]


def test_ray_workers_survive_a_killed_actor_and_take_weight_pushes():
    from arcforge.rollout.ray_backend import RayWorkers, init_ray, ray_env_service

    world = build_world(WorldConfig(seed=7, scale=0.1))
    tok = train_tokenizer([d.text for d in world.corpus()[:200]], vocab_size=400)
    model = end_biased_nano(tok, 2048)
    pool = world.tasks("terminal")[:4]
    init_ray(num_cpus=2)
    try:
        orch = Orchestrator(
            {"terminal": pool}, OrchestratorSettings(Mixture({"terminal": 1}), 4, group_size=1)
        )
        envs = ray_env_service("terminal", ["terminal"], env_factory(world), 4)
        orch.register(envs)
        cfg = AgentConfig(max_turns=2, max_new_tokens=16, context_budget=2048)
        workers = RayWorkers(orch, model, tok, cfg, 2, pad_token_id=tok.pad_token_id)
        with running(workers):
            killed = kill_in_episode(workers, envs, timeout=120, poll=0.05)
            batch = orch.next_batch(timeout=180)
            workers.push_weights(model.state_dict(), 1, timeout=120)
            versions = workers.versions(timeout=120)
    finally:
        ray.shutdown()
    assert killed is not None
    assert sorted(g.task_id for g in batch.groups) == sorted(t.id for t in pool)
    assert orch.counts["retries"] >= 1 and workers.restarts >= 1 and not orch.failed
    assert all(any(s.source == "model" for s in t.segments) for t in batch.trajectories)
    assert versions == [1, 1]  # the restarted actor too
