"""Agentic-RL stage runner: task sources -> orchestrator + environment services -> rollout
workers (threads or Ray actors) -> `train_async_rl` -> checkpoint.

Each source (`world:swe`, `world:terminal`, `world:search`, `world:tool`, `world:tir`,
`jsonl:tasks.jsonl`, ...) is a pool of the mixture with its weight as its share of every batch;
a pool is named by its task kind when it holds one kind (sources of the same kind merge, weights
adding up), else by the source file's stem (e.g. "rl_pool" for a synthesized pool of SWE and
terminal tasks; its jobs still go to the service of each task's kind). Environments: the
`services` of the config (HTTP env services started elsewhere with `arcforge env serve`), else
one in-process service per kind over the world's environments (`make_env`), or, with
backend "ray", one EnvHost actor per kind.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from arcforge.config import STAGE_CONFIGS
from arcforge.data.sources import load_records
from arcforge.envs.registry import FACTORIES, env_factory
from arcforge.errors import UserError
from arcforge.model.checkpoint import save_checkpoint
from arcforge.pipeline import RunContext, register_stage
from arcforge.progress import progress
from arcforge.rollout.envservice import EnvServiceError, http_service, local_service
from arcforge.rollout.orchestrator import Mixture, Orchestrator
from arcforge.stages.common import model_for_stage
from arcforge.stages.rl import in_band
from arcforge.train.async_rl import AgenticRLStageCfg, kept_probe, train_async_rl
from arcforge.train.loop import read_rows
from arcforge.types import Task

STAGE_CONFIGS["agentic_rl"] = AgenticRLStageCfg


def pool_settings(
    stage: AgenticRLStageCfg,
) -> tuple[dict[str, list[Task]], dict[str, float], dict[str, float]]:
    """Tasks, mixture weight and sampling temperature of each pool, from the stage's sources
    (a source without a temperature samples at the stage's).

    Sources of one task kind share a pool (a source of several kinds is a pool named after
    it). A source whose temperature differs from the pool its kind already has gets a pool of
    its own, `<kind>@<temperature>`: a synthesized pool's kinds are known only once the synth
    stage has run (the demo's may hold SWE or terminal tasks), so a clash is not an error."""
    pools: dict[str, list[Task]] = {}
    weights: Counter[str] = Counter()
    temps: dict[str, float] = {}
    for s in stage.sources:
        records = [r for r in load_records(s.source) if r.task is not None]
        cut = s.difficulty or stage.difficulty
        tasks = [r.task for r in records if in_band(r, cut)]
        if not tasks:
            band = f" in the difficulty band {list(cut)}" if records and cut else ""
            raise UserError(f"stage {stage.name!r}: source {s.source!r} holds no tasks{band}")
        kinds = Counter(t.kind for t in tasks)
        bad = sorted(k for k in kinds if k not in FACTORIES)
        if bad:
            raise UserError(
                f"stage {stage.name!r}: source {s.source!r} has task kind(s) {bad} "
                f"with no environment; known: {sorted(FACTORIES)}"
            )
        name = next(iter(kinds)) if len(kinds) == 1 else Path(s.source.split(":", 1)[-1]).stem
        temp = stage.temperature if s.temperature is None else s.temperature
        if temps.setdefault(name, temp) != temp:
            name = f"{name}@{temp:g}"
            temps[name] = temp
        pools.setdefault(name, []).extend(tasks)
        weights[name] += s.weight
    return pools, dict(weights), temps


def make_probe(ctx: RunContext, stage: AgenticRLStageCfg, pad: int, budget: int):
    """The stage's probe (see ProbeCfg): greedy success per suite on the world's dev tasks,
    with the eval's turn and token budgets unless the probe sets its own."""
    from arcforge.rollout.agent import AgentConfig, run_episodes
    from arcforge.rollout.engine import LocalEngine

    pcfg, world, tok = stage.probe, ctx.world, ctx.tokenizer
    assert pcfg is not None
    tasks = {}
    for suite in pcfg.suites:
        try:
            tasks[suite] = world.tasks(suite, "dev")[: pcfg.n]
        except ValueError as err:
            raise UserError(f"stage {stage.name!r}: probe suite {suite!r}: {err}") from None
    acfg = AgentConfig(
        max_turns=pcfg.max_turns or ctx.cfg.eval.max_turns,
        max_new_tokens=pcfg.max_new_tokens or ctx.cfg.eval.max_new_tokens,
        context_budget=budget,
        temperature=0.0,
    )
    factory = env_factory(world)

    def probe(model) -> dict[str, list[float]]:
        engine = LocalEngine(model, pad_token_id=pad, max_batch=ctx.cfg.eval.batch_size)
        out: dict[str, list[float]] = {}
        with progress(len(tasks), "dev probe") as bar:
            for suite, ts in tasks.items():
                trajs = run_episodes(engine, tok, factory, ts, acfg)
                out[suite] = [float(tr.reward >= 1.0) for tr in trajs]
                bar.update(len(out), **{suite: sum(out[suite]) / len(out[suite])})
        return out

    return probe


def _swarm_pool(ctx: RunContext, stage: AgenticRLStageCfg, kinds: list[str]):
    """The frozen subagents of a stage with swarm tasks (None without any)."""
    if "swarm" not in kinds:
        return None
    if stage.swarm is None or stage.backend != "local" or stage.services:
        raise UserError(
            f"stage {stage.name!r}: swarm tasks need a `swarm:` block (the frozen "
            "subagents' checkpoint) and the in-process local backend"
        )
    from arcforge.model.checkpoint import load_model
    from arcforge.rollout.engine import LocalEngine
    from arcforge.stages.distill import teacher_dir

    model = load_model(teacher_dir(ctx, stage.swarm.subagents))
    engine = LocalEngine(model, pad_token_id=ctx.tokenizer.pad_token_id or 0, max_batch=64)
    return stage.swarm.pool(engine, ctx.tokenizer, env_factory(ctx.world), stage.context_budget)


def _services(stage: AgenticRLStageCfg, kinds: list[str], world, swarm=None) -> list:
    if stage.services:
        if stage.call_credit:
            raise UserError(
                f"stage {stage.name!r}: call_credit shapes the rewards of in-process "
                "and Ray environments; an HTTP service scores as it was started"
            )
        try:
            return [http_service(s.url, s.timeout) for s in stage.services]
        except EnvServiceError as err:
            raise UserError(f"stage {stage.name!r}: {err}") from None
    factory = env_factory(world, tool={"call_credit": stage.call_credit}, swarm=swarm or {})
    if stage.backend == "ray":
        from arcforge.rollout.ray_backend import ray_env_service

        return [ray_env_service(k, [k], factory, stage.env_concurrency) for k in kinds]
    return [local_service(k, [k], factory, stage.env_concurrency) for k in kinds]


@register_stage("agentic_rl")
def run_agentic_rl_stage(ctx: RunContext, stage: AgenticRLStageCfg, out: Path) -> dict:
    tok, world = ctx.tokenizer, ctx.world
    model = model_for_stage(ctx, stage)
    n_pos = getattr(model.config, "max_position_embeddings", None)
    if n_pos is not None and stage.context_budget > n_pos:
        raise UserError(
            f"stage {stage.name!r}: context_budget {stage.context_budget} exceeds the "
            f"model's max_position_embeddings {n_pos}"
        )
    pools, weights, temps = pool_settings(stage)
    # pools sampled at their own temperature get their own agent config (the rest: the stage's)
    pool_cfgs = {p: stage.agent(t) for p, t in temps.items() if t != stage.temperature}
    orch = Orchestrator(
        pools,
        Mixture(weights, stage.mixture_tolerance),
        stage.groups_per_step,
        stage.group_size,
        stage.tau,
        stage.sync_every,
        stage.max_retries,
        stage.seed,
        stage.max_pool_failures,
        stage.max_refill_tries,
    )
    pad = tok.pad_token_id or 0
    if stage.backend == "ray":
        from arcforge.rollout.ray_backend import RayWorkers, init_ray

        init_ray(stage.ray_address, num_cpus=None)
        workers = RayWorkers(
            orch,
            model,
            tok,
            stage.agent(),
            stage.workers,
            pad_token_id=pad,
            precision=stage.engine_precision,
            pool_cfgs=pool_cfgs,
        )
    else:
        from arcforge.rollout.engine import LocalEngine
        from arcforge.rollout.workers import LocalWorkers

        engine = LocalEngine(
            model,
            pad_token_id=pad,
            precision=stage.engine_precision,
            max_batch=max(64, stage.workers * stage.group_size),
        )
        workers = LocalWorkers(orch, engine, tok, stage.agent(), stage.workers, pool_cfgs=pool_cfgs)
    kinds = sorted({t.kind for tasks in pools.values() for t in tasks})
    pool = _swarm_pool(ctx, stage, kinds)
    if pool is not None:
        from arcforge.rollout.swarm import swarm_env_maker

        clock = lambda: orch.version * stage.sync_every  # noqa: E731  (trainer steps done)
        swarm = {"make": swarm_env_maker(pool, stage.swarm.budget(), stage.swarm.reward(), clock)}
    for svc in _services(stage, kinds, world, swarm if pool is not None else None):
        orch.register(svc)
    probe = make_probe(ctx, stage, pad, n_pos or stage.context_budget) if stage.probe else None
    try:
        rows = train_async_rl(
            model,
            orch,
            workers,
            stage,
            out,
            pad_id=pad,
            desc=f"agentic rl {stage.name}",
            probe=probe,
            temperatures=temps if pool_cfgs else None,
        )
    finally:
        if pool is not None:
            pool.close()
    save_checkpoint(model, tok, out / "checkpoint", extra={"stage": stage.name})
    k = max(1, len(rows) // 5)
    mean = lambda xs, key: sum(r.get(key, 0.0) for r in xs) / max(1, len(xs))  # noqa: E731
    last = rows[-1] if rows else {}

    def pool_mean(xs: list[dict], pool: str, what: str = "reward") -> float | None:
        have = [r for r in xs if f"{what}_{pool}" in r]  # steps that drew the pool
        return round(mean(have, f"{what}_{pool}"), 3) if have else None

    tokens = {p: sum(r.get(f"tokens_{p}", 0) for r in rows) for p in weights}

    probes = read_rows(out / "probe.jsonl") if stage.probe else []
    summary: dict = {"steps": stage.steps}
    kept = kept_probe(probes, stage.probe.keep) if stage.probe else None
    if stage.probe and kept:
        summary["kept_step"] = kept["step"]
        if (out / "probe" / f"last-{stage.steps}.safetensors").is_file():
            summary["last_weights"] = f"probe/last-{stage.steps}.safetensors"  # not kept
        summary["probe_mean"] = {r["step"]: round(r["mean"], 3) for r in probes}  # dev success
    return {
        **summary,
        "mixture": {kind: round(w / sum(weights.values()), 3) for kind, w in weights.items()},
        "reward_first": mean(rows[:k], "reward_mean"),
        "reward_last": mean(rows[-k:], "reward_mean"),
        "signal_frac": round(mean(rows, "signal_frac"), 3),  # groups with a gradient
        "pool_reward": {p: [pool_mean(rows[:k], p), pool_mean(rows[-k:], p)] for p in weights},
        "pool_solved": {
            p: [pool_mean(rows[:k], p, "solved"), pool_mean(rows[-k:], p, "solved")]
            for p in weights
        },
        "pool_signal": {p: pool_mean(rows, p, "signal") for p in weights},  # groups w/ gradient
        # each pool's share of the trained tokens (with token_mean: of the loss)
        "pool_tokens": {p: round(n / max(1, sum(tokens.values())), 3) for p, n in tokens.items()},
        "dropped_stale": last.get("dropped_stale", 0),
        # dynamic sampling's drops up to the workers' stop (the metrics rows: up to each step)
        "dropped_uniform": orch.stats()["dropped_uniform"],
        "pool_dropped_uniform": dict(orch.uniform_by_pool),
        "retries": last.get("retries", 0),
        "failed": last.get("failed", 0),
        "overlong": sum(r.get("overlong", 0) for r in rows),
        "partial": sum(r.get("partial", 0) for r in rows),
        "idle_frac": last.get("idle_frac", 0.0),
        "trajectories_per_s": last.get("trajectories_per_s", 0.0),
    }
