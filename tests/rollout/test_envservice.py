"""Environment services over HTTP (FastAPI + uvicorn on loopback, httpx client): the agent loop
runs the world's real tool/search environments remotely with the same result as in process;
protocol errors are clear; a service that dies mid-run has its jobs retried on another one."""

from __future__ import annotations

import time

import pytest
from worker_runs import running

from arcforge.envs.registry import env_factory
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.envservice import (
    BackgroundServer,
    EnvHost,
    EnvServiceError,
    HttpEndpoint,
    http_service,
)
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings
from arcforge.rollout.policies import expert_engine
from arcforge.rollout.workers import LocalWorkers


@pytest.fixture
def servers(world):
    started = []

    def start(name: str, kinds=("tool", "search"), n: int = 8) -> BackgroundServer:
        srv = BackgroundServer(EnvHost(env_factory(world), list(kinds), n, name)).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


CFG = AgentConfig(max_turns=10, max_new_tokens=256, context_budget=8192)


def test_remote_environments_match_in_process(world, tok, servers):
    srv = servers("tools")
    svc = http_service(srv.url)
    assert (svc.name, svc.kinds, svc.max_concurrency) == ("tools", ["tool", "search"], 8)
    tasks = world.tasks("tool")[:2] + world.tasks("search")[:2]
    engine = expert_engine(tok, tasks)
    remote = run_episodes(engine, tok, svc.open, tasks, CFG)
    local = run_episodes(engine, tok, env_factory(world), tasks, CFG)
    assert [t.reward for t in remote] == [1.0] * 4
    for r, loc in zip(remote, local):
        assert r.token_ids == loc.token_ids and r.loss_mask == loc.loss_mask
        assert [m.content for m in r.messages] == [m.content for m in loc.messages]
    assert HttpEndpoint(srv.url).call("info", {})["open"] == 0  # every session was closed


def test_protocol_errors_name_the_service_and_the_problem(world, servers):
    srv = servers("tools", kinds=("tool",), n=1)
    ep = HttpEndpoint(srv.url)
    swe = world.tasks("swe")[0]
    with pytest.raises(EnvServiceError, match=r"open answered 400: .*serves \['tool'\], not 'swe'"):
        ep.open(swe).reset(swe)
    with pytest.raises(EnvServiceError, match="no open session 'nope'"):
        ep.call("step", {"session": "nope", "message": {"role": "assistant", "content": ""}})
    first = ep.open(world.tasks("tool")[0])
    first.reset(world.tasks("tool")[0])
    with pytest.raises(EnvServiceError, match="is full"):
        ep.open(world.tasks("tool")[1]).reset(world.tasks("tool")[1])
    first.close()
    srv.stop()
    with pytest.raises(EnvServiceError, match=f"env service {srv.url}: info failed: Connect"):
        HttpEndpoint(srv.url, timeout=2).call("info", {})


def test_jobs_of_a_dead_service_are_retried_on_another(world, tok, servers):
    pool = world.tasks("search")[:6]
    a, b = servers("a", n=2), servers("b", n=2)
    orch = Orchestrator(
        {"search": pool},
        OrchestratorSettings(Mixture({"search": 1}), 6, group_size=1, max_retries=3),
    )
    orch.register(http_service(a.url, timeout=5))
    orch.register(http_service(b.url, timeout=5))
    a.stop()  # service a is gone before any episode: every job placed there must move to b
    workers = LocalWorkers(orch, expert_engine(tok, pool), tok, CFG, n=3)
    t0 = time.monotonic()
    with running(workers):
        batch = orch.next_batch(timeout=60)
    assert sorted(g.task_id for g in batch.groups) == sorted(t.id for t in pool)
    assert all(t.reward == 1.0 for t in batch.trajectories)
    assert orch.counts["retries"] >= 1 and not orch.failed
    assert time.monotonic() - t0 < 60
