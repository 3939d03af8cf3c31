"""The agentic-RL stage: its config (`AgenticRLStageCfg`) and runner, task sources ->
orchestrator + environment services -> rollout workers (threads on the stage's `engine:`, or
Ray actors) -> `train_async_rl` -> checkpoint.

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
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from arcforge.config import RolloutISStageCfg, SourceCfg, Strict
from arcforge.data.sources import Record, load_records
from arcforge.envs.registry import FACTORIES, env_factory
from arcforge.errors import UserError
from arcforge.metrics import read_rows
from arcforge.model.checkpoint import load_model
from arcforge.progress import progress
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.envservice import EnvServiceError, http_service, local_service
from arcforge.rollout.orchestrator import Mixture, Orchestrator, OrchestratorSettings
from arcforge.rollout.swarm import SwarmCfg, swarm_env_maker
from arcforge.rollout.workers import LocalWorkers
from arcforge.stages.common import (
    first_and_last_fifth,
    model_for_stage,
    rollout_engine,
    row_mean,
)
from arcforge.stages.context import RunContext
from arcforge.stages.distill import teacher_dir
from arcforge.stages.rl import in_band
from arcforge.stages.world_source import run_records
from arcforge.train.async_rl import kept_probe, train_async_rl
from arcforge.train.lora import plain_model, save_stage_model
from arcforge.types import Task


class EnvServiceCfg(Strict):
    """An HTTP environment service (see arcforge.rollout.envservice) started elsewhere."""

    url: str
    timeout: float = Field(600.0, gt=0)


class AgenticSourceCfg(SourceCfg):
    """A task source of agentic RL: SourceCfg plus the sampling temperature of its episodes."""

    # None: the stage's `temperature`. A tiny model's tool-call format breaks down at T 1.0 on
    # some kinds (terminal; docs/experiments.md, "Agentic RL: sampling temperature") while
    # others learn best at T 1.0, so a pool may sample at its own temperature. A source whose
    # temperature differs from its kind's pool gets a pool of its own (pool_settings).
    temperature: float | None = Field(None, gt=0)


class ProbeCfg(Strict):
    """Checkpoint selection on the world's dev tasks (`World.tasks(suite, "dev")`)."""

    suites: list[str] = Field(min_length=1)  # e.g. [tool, tir, terminal]
    n: int = Field(100, gt=0)  # dev tasks per suite (at most 100 exist)
    every: int = Field(4, gt=0)  # steps between probes (also at step 0 and the last step)
    # which probed weights the stage ends on (kept_probe): the last step's unless its paired
    # dev change from the best probed step is below zero beyond its 95% interval (the
    # default), the best mean ("best"; step 0: no change), or the last step's ("last")
    keep: Literal["last_unless_worse", "best", "last"] = "last_unless_worse"
    max_turns: int | None = Field(None, gt=0)  # None: the eval's (what the report measures)
    max_new_tokens: int | None = Field(None, gt=0)


class AgenticRLStageCfg(RolloutISStageCfg):
    """Agentic RL on a mixture of environment task kinds, async (tau, sync_every) or sync; the
    loss fields are `LossCfg`'s (double_sided_is against the rollout logprobs); `engine` is the
    rollout workers' engine (backend local; Ray actors hold LocalEngines of their own)."""

    trainer: ClassVar[str] = "agentic RL"
    kind: Literal["agentic_rl"]
    # task sources (world:swe, world:terminal, ...); weight = mixture share
    sources: list[AgenticSourceCfg]
    steps: int = Field(20, gt=0)
    groups_per_step: int = Field(8, gt=0)
    group_size: int = Field(4, ge=2)
    tau: int = Field(2, ge=0)  # drop a group when version - start_version > tau
    sync_every: int = Field(1, ge=1)  # K: trainer steps per weight push
    reset_optimizer: bool = False  # clear Adam's moments at every push
    workers: int = Field(4, gt=0)
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None  # None: start a local Ray; "auto": join `ray start` cluster
    services: list[EnvServiceCfg] = []  # HTTP env services; empty: in-process, one per kind
    env_concurrency: int = Field(16, gt=0)  # episodes per in-process / Ray env service
    mixture_tolerance: float = Field(0.05, ge=0, le=1)
    max_retries: int = Field(2, ge=0)
    max_pool_failures: int = Field(8, ge=1)  # a pool failing this many jobs in a row stops the run
    # dynamic sampling (DAPO): drop a group whose episodes all got one reward and run a fresh
    # task in its slot, at most this many times in a row per pool (0: keep every group)
    max_refill_tries: int = Field(0, ge=0)
    # process reward on tool tasks (ToolEnv's call_credit): a wrong answer scores this x the
    # share of the task's reference calls the episode made; a right one scores 1 (0: exact match)
    call_credit: float = Field(0.0, ge=0, lt=1)
    weight_sync_timeout: float = Field(120.0, gt=0)
    batch_timeout: float = Field(1800.0, gt=0)
    max_turns: int = Field(6, gt=0)
    context_budget: int = Field(1024, gt=16)
    # keep tasks whose `difficulty` lies in [lo, hi] (tasks without one are kept): a band the
    # policy partly solves gives groups with mixed rewards, the only ones with a gradient
    difficulty: tuple[float, float] | None = None
    top_p: float = Field(1.0, gt=0, le=1)
    # engine and trainer logprobs under logits / temperature: the policy gradient of the
    # tempered policy the episodes were sampled from (False: of the T=1 policy; see
    # arcforge.rollout.engines.base's header); LocalEngine only
    tempered_logprobs: bool = False
    # > 0: the stage ends on (and probes) a Polyak average of its weights with this decay, not
    # the last iterate (see WeightEMA); 0: the online weights
    weight_ema: float = Field(0.0, ge=0, lt=1)
    micro_batch: int = Field(16, gt=0)
    probe: ProbeCfg | None = None
    # tasks of kind "swarm": orchestrator episodes over subagents frozen at a named checkpoint
    swarm: SwarmCfg | None = None

    @model_validator(mode="after")
    def _engine_and_backend(self) -> AgenticRLStageCfg:
        if self.engine.kind != "local" and self.backend != "local":
            raise ValueError(
                f"engine.kind {self.engine.kind} needs backend local "
                "(Ray rollout actors run LocalEngines of their own)"
            )
        return self

    def agent(self, temperature: float | None = None) -> AgentConfig:
        """The agent-loop config of the rollout workers (no seed: workers' calls can merge), at
        `temperature` (None: the stage's)."""
        temp = self.temperature if temperature is None else temperature
        return AgentConfig(
            max_turns=self.max_turns,
            max_new_tokens=self.max_new_tokens,
            context_budget=self.context_budget,
            temperature=temp,
            top_p=self.top_p,
            tempered_logprobs=self.tempered_logprobs,
        )


def pool_settings(
    stage: AgenticRLStageCfg, load: Callable[[str], list[Record]] = load_records
) -> tuple[dict[str, list[Task]], dict[str, float], dict[str, float]]:
    """Tasks, mixture weight and sampling temperature of each pool, from the stage's sources
    read with `load` (a source without a temperature samples at the stage's).

    Sources of one task kind share a pool (a source of several kinds is a pool named after
    it). A source whose temperature differs from the pool its kind already has gets a pool of
    its own, `<kind>@<temperature>`: a synthesized pool's kinds are known only once the synth
    stage has run (the demo's may hold SWE or terminal tasks), so a clash is not an error."""
    pools: dict[str, list[Task]] = {}
    weights: Counter[str] = Counter()
    temps: dict[str, float] = {}
    for s in stage.sources:
        records = [r for r in load(s.source) if r.task is not None]
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
        engine = LocalEngine(
            plain_model(model), pad_token_id=pad, max_batch=ctx.cfg.eval.batch_size
        )
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


def run_agentic_rl_stage(ctx: RunContext, stage: AgenticRLStageCfg, out: Path) -> dict:
    tok, world = ctx.tokenizer, ctx.world
    model = model_for_stage(ctx, stage)
    n_pos = getattr(model.config, "max_position_embeddings", None)
    if n_pos is not None and stage.context_budget > n_pos:
        raise UserError(
            f"stage {stage.name!r}: context_budget {stage.context_budget} exceeds the "
            f"model's max_position_embeddings {n_pos}"
        )
    pools, weights, temps = pool_settings(stage, partial(run_records, ctx))
    # pools sampled at their own temperature get their own agent config (the rest: the stage's)
    pool_cfgs = {p: stage.agent(t) for p, t in temps.items() if t != stage.temperature}
    settings = OrchestratorSettings(
        mixture=Mixture(weights, stage.mixture_tolerance),
        groups_per_batch=stage.groups_per_step,
        group_size=stage.group_size,
        tau=stage.tau,
        sync_every=stage.sync_every,
        max_retries=stage.max_retries,
        seed=stage.seed,
        max_pool_failures=stage.max_pool_failures,
        max_refill_tries=stage.max_refill_tries,
    )
    orch = Orchestrator(pools, settings)
    pad = tok.pad_token_id or 0
    with ExitStack() as stack:  # the rollout engine and the swarm's subagents are closed last
        if stage.backend == "ray":
            from arcforge.rollout.ray_backend import RayWorkers, init_ray

            init_ray(stage.ray_address, num_cpus=None)
            workers = RayWorkers(
                orch,
                plain_model(model),
                tok,
                stage.agent(),
                stage.workers,
                pad_token_id=pad,
                precision=stage.engine_precision,
                pool_cfgs=pool_cfgs,
            )
        else:
            batch = max(64, stage.workers * stage.group_size)
            engine = stack.enter_context(
                rollout_engine(stage.engine, model, pad, stage.engine_precision, batch)
            )
            workers = LocalWorkers(
                orch, engine, tok, stage.agent(), stage.workers, pool_cfgs=pool_cfgs
            )
        kinds = sorted({t.kind for tasks in pools.values() for t in tasks})
        pool = _swarm_pool(ctx, stage, kinds)
        swarm = None
        if pool is not None:
            stack.callback(pool.close)
            clock = lambda: orch.version * stage.sync_every  # noqa: E731  (trainer steps done)
            make = swarm_env_maker(pool, stage.swarm.budget(), stage.swarm.reward(), clock)
            swarm = {"make": make}
        for svc in _services(stage, kinds, world, swarm):
            orch.register(svc)
        probe = make_probe(ctx, stage, pad, n_pos or stage.context_budget) if stage.probe else None
        rows = train_async_rl(
            model,
            orch,
            workers,
            stage,
            out,
            pad_id=pad,
            desc=f"agentic rl {stage.name}",
            logging=ctx.cfg.logging,
            run_name=f"{ctx.cfg.name}/{stage.name}",
            probe=probe,
            temperatures=temps if pool_cfgs else None,
        )
    save_stage_model(model, tok, out / "checkpoint", {"stage": stage.name}, stage.lora)
    first, last = first_and_last_fifth(rows)
    final = rows[-1] if rows else {}

    def pool_mean(xs: list[dict], pool: str, what: str = "reward") -> float | None:
        have = [r for r in xs if f"{what}_{pool}" in r]  # steps that drew the pool
        return round(row_mean(have, f"{what}_{pool}"), 3) if have else None

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
        "reward_first": row_mean(first, "reward_mean"),
        "reward_last": row_mean(last, "reward_mean"),
        "signal_frac": round(row_mean(rows, "signal_frac"), 3),  # groups with a gradient
        "pool_reward": {p: [pool_mean(first, p), pool_mean(last, p)] for p in weights},
        "pool_solved": {
            p: [pool_mean(first, p, "solved"), pool_mean(last, p, "solved")] for p in weights
        },
        "pool_signal": {p: pool_mean(rows, p, "signal") for p in weights},  # groups w/ gradient
        # each pool's share of the trained tokens (with token_mean: of the loss)
        "pool_tokens": {p: round(n / max(1, sum(tokens.values())), 3) for p, n in tokens.items()},
        "dropped_stale": final.get("dropped_stale", 0),
        # dynamic sampling's drops up to the workers' stop (the metrics rows: up to each step)
        "dropped_uniform": orch.stats()["dropped_uniform"],
        "pool_dropped_uniform": dict(orch.uniform_by_pool),
        "retries": final.get("retries", 0),
        "failed": final.get("failed", 0),
        "overlong": sum(r.get("overlong", 0) for r in rows),
        "partial": sum(r.get("partial", 0) for r in rows),
        "idle_frac": final.get("idle_frac", 0.0),
        "trajectories_per_s": final.get("trajectories_per_s", 0.0),
    }
