"""The general-RL stage: its config (`GeneralRLStageCfg`) and runner, chat/instruction
prompts + anchors -> hybrid reward -> `train_rl`.

Order of work: the starting policy (previous stage's checkpoint); the ORM (a saved one from
`orm.path`, else trained from the starting checkpoint on `orm.train.sources` into
`<stage>/orm/`, reused when a rerun finds it finished); the GRM when `grm` names an endpoint;
the prompt pool (the stage's sources plus the human anchors); then the GRPO loop of
`arcforge.train.rl` with `hybrid_scorer` and, with anchors on, `AnchorEngine`.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import Field

from arcforge.config import SourceCfg, Strict
from arcforge.data.sources import Record
from arcforge.metrics import read_rows
from arcforge.rewards.anchors import anchor_tasks
from arcforge.rewards.hybrid import HybridCfg, HybridReward
from arcforge.rewards.orm import RewardModel
from arcforge.rollout.prompts import prompt_from_record
from arcforge.stages.common import (
    grpo_summary,
    model_for_stage,
    rollout_engine,
    trainer_options,
)
from arcforge.stages.context import RunContext
from arcforge.stages.rl import RLStageCfg, load_prompt_records
from arcforge.stages.world_source import run_records
from arcforge.train.general_rl import (
    AnchorEngine,
    anchor_prompts,
    anchor_reply_ids,
    hybrid_scorer,
    mix_anchors,
)
from arcforge.train.lora import plain_model, save_stage_model
from arcforge.train.resume import find_state
from arcforge.train.reward_model import (
    RewardModelCfg,
    load_pairs,
    pairs_from_records,
    train_reward_model,
)
from arcforge.train.rl import train_rl


class OrmCfg(Strict):
    """The ORM term: a saved reward model (`path`), else one trained at stage start (`train`)."""

    path: str | None = None
    train: RewardModelCfg | None = RewardModelCfg()


class GrmCfg(Strict):
    """The GRM term: an LLM judge at any OpenAI-compatible endpoint."""

    base_url: str
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    k: int = Field(3, ge=1)
    retries: int = Field(2, ge=0)
    temperature: float = Field(0.7, ge=0)
    max_tokens: int = Field(256, gt=0)
    timeout: float = Field(60.0, gt=0)
    workers: int = Field(4, ge=1)


class AnchorCfg(Strict):
    """Human-written anchors: a share of the prompt pool, one human answer per anchor group."""

    enabled: bool = True
    path: str | None = None  # JSONL of anchors; default: the package's anchors.jsonl
    weight: float = Field(0.1, ge=0, lt=1)  # share of the prompt pool that is anchor prompts


class GeneralRLStageCfg(RLStageCfg):
    """General RL: chat/instruction tasks, hybrid reward, human anchors (the rl stage's
    settings otherwise)."""

    kind: Literal["general_rl"]  # type: ignore[assignment]
    sources: list[SourceCfg] = [SourceCfg(source="world:chat")]
    reward: HybridCfg = HybridCfg()
    orm: OrmCfg | None = OrmCfg()
    grm: GrmCfg | None = None
    anchors: AnchorCfg = AnchorCfg()


def stage_orm(
    stage: GeneralRLStageCfg,
    policy,
    tokenizer,
    out: Path,
    load: Callable[[str], list[Record]],
) -> RewardModel | None:
    """The stage's ORM: loaded from orm.path or out/orm, else trained from the policy's weights
    on the pairs of its sources (read with `load`)."""
    if stage.orm is None:
        return None
    if stage.orm.path:
        return RewardModel.load(stage.orm.path)
    if (out / "orm" / "DONE").exists():
        return RewardModel.load(out / "orm")
    if stage.orm.train is None:
        return None
    cfg = stage.orm.train
    pairs = load_pairs(cfg.sources, load)
    held = pairs_from_records(load(cfg.heldout), cfg.heldout) if cfg.heldout else []
    rm = RewardModel(copy.deepcopy(policy), tokenizer, cfg.max_len, seed=cfg.seed)
    train_reward_model(rm, pairs, cfg, out / "orm", held, desc=f"orm {stage.name}")
    rm.save(out / "orm")
    (out / "orm" / "DONE").write_text("ok\n")
    # the saved copy, as a resumed run reads it: both runs score with the very same model
    return RewardModel.load(out / "orm")


def stage_grm(stage: GeneralRLStageCfg):
    if stage.grm is None:
        return None
    from arcforge.llm import LLMClient
    from arcforge.rewards.grm import GenerativeRM

    g = stage.grm
    client = LLMClient(g.base_url, g.model, g.api_key_env, timeout=g.timeout)
    return GenerativeRM(
        client,
        k=g.k,
        retries=g.retries,
        temperature=g.temperature,
        max_tokens=g.max_tokens,
        seed=stage.seed,
        workers=g.workers,
    )


def trim_reward_log(out: Path) -> None:
    """Keep the reward.jsonl rows of the steps a resumed run does not redo (none on a fresh
    start): a GRPO step scores 1 + `refills` batches, one row each, as its metrics row says."""
    log, state, keep = out / "reward.jsonl", find_state(out), 0
    if state is not None:
        step = json.loads((state / "trainer.json").read_text())["step"]
        keep = sum(
            1 + r.get("refills", 0) for r in read_rows(out / "metrics.jsonl") if r["step"] <= step
        )
    if log.exists():
        log.write_text("".join(ln + "\n" for ln in log.read_text().splitlines()[:keep]))


def _sum_log(path: Path) -> Counter:
    total: Counter = Counter()
    if path.exists():
        for ln in path.read_text().splitlines():
            row = json.loads(ln)
            total.update({k: v for k, v in row.items() if isinstance(v, int)})
    return total


def run_general_rl_stage(ctx: RunContext, stage: GeneralRLStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    load = partial(run_records, ctx)
    orm = stage_orm(stage, plain_model(model), tok, out, load)  # a full-weight copy, no LoRA
    hybrid = HybridReward(stage.reward, orm, stage_grm(stage))
    records = load_prompt_records(stage.sources, stage.seed, stage.name, load=load)
    tools = ctx.world.tools()  # prompts of tasks that name tools offer them (the tool route)
    prompts = [prompt_from_record(r, tok, stage.thinking, tools) for r in records]
    pad = tok.pad_token_id or 0
    batch = max(64, stage.prompts_per_step * stage.group_size)
    with rollout_engine(stage.engine, model, pad, stage.engine_precision, batch) as sampler:
        engine = sampler
        n_anchor = 0
        if stage.anchors.enabled:
            anchors = anchor_prompts(tok, anchor_tasks(stage.anchors.path), stage.thinking)
            n_anchor = len(anchors)
            prompts = mix_anchors(prompts, anchors, stage.anchors.weight)
            replies = {
                tuple(a.ids): anchor_reply_ids(tok, a.task.metadata["anchor"], stage.thinking)
                for a in anchors
            }
            engine = AnchorEngine(sampler, model, replies)
        log = out / "reward.jsonl"
        trim_reward_log(out)
        scorer = hybrid_scorer(tok, hybrid, log, tools)
        options = trainer_options(ctx, stage, "general_rl")
        rows = train_rl(model, engine, prompts, scorer, stage, out, **options)
    save_stage_model(model, tok, out / "checkpoint", {"stage": stage.name}, stage.lora)
    counts = _sum_log(log)
    return {
        **grpo_summary(stage, prompts, rows),
        "anchor_prompts": n_anchor,
        "anchors_injected": getattr(engine, "injected", 0),
        "gated_frac": counts["gated"] / max(1, counts["scored"]),
        "disagreements": counts["disagree"],
        "grm_failed": counts["grm_failed"],
        "orm_heldout_accuracy": (orm.meta.get("training") or {}).get("heldout_accuracy")
        if orm is not None
        else None,
    }
