"""Stage plumbing the stage runners share: the starting model (`model_for_stage`: the init
checkpoint, the user's local HF model, or a preset, with the stage's LoRA), the rollout engine
of an on-policy stage, the on-policy trainers' run options and the summaries of metric rows.

The run context is in `arcforge.stages.context`, the `world:` source in
`arcforge.stages.world_source`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from arcforge.chat.formats import chat_format
from arcforge.config import EngineCfg, StageCfg
from arcforge.device import run_device
from arcforge.model.checkpoint import init_model, load_model, resize_for_tokenizer
from arcforge.model.presets import build_config
from arcforge.model.prime import copy_config_fields, init_for_copying
from arcforge.rollout.engines.base import Engine
from arcforge.rollout.engines.factory import make_engine
from arcforge.rollout.prompts import stop_token_ids
from arcforge.stages.context import RunContext, resolve_model_path
from arcforge.train.lora import apply_lora, plain_model


def is_main_rank() -> bool:
    """False in the processes of a torchrun launch other than rank 0 (they write no side
    files: the stage's directory is shared)."""
    return int(os.environ.get("RANK", "0")) == 0


# ---- model and rollout engine --------------------------------------------------------------


def model_for_stage(ctx: RunContext, stage: StageCfg) -> torch.nn.Module:
    """The stage's starting model: its init checkpoint, the user's model.path, or a preset;
    with the stage's `lora:`, wrapped in LoRA adapters (arcforge.train.lora)."""
    where = f"stage {stage.name!r}"
    return apply_lora(starting_model(ctx, stage), getattr(stage, "lora", None), where, stage.seed)


def starting_model(ctx: RunContext, stage: StageCfg) -> torch.nn.Module:
    """The stage's starting weights: its init checkpoint, the user's model.path, or a preset."""
    ckpt = ctx.init_checkpoint(stage)
    if ckpt is not None:
        return load_model(ckpt)
    m = ctx.cfg.model
    if m.path:
        model = load_model(resolve_model_path(m.path))
        if chat_format(ctx.tokenizer).name == "arcforge":
            resize_for_tokenizer(model, ctx.tokenizer)  # the native format adds no token
        return model
    tok = ctx.tokenizer
    conf = build_config(
        m.preset,
        vocab_size=len(tok),
        max_position_embeddings=m.max_position_embeddings,
        rope_theta=m.rope_theta,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **(copy_config_fields() if m.prime_induction else {}),
        **m.overrides,
    )
    model = init_model(conf, seed=m.seed)  # on the CPU: the same weights on every device
    if m.prime_induction:
        init_for_copying(model, seed=m.seed)
    return model.to(run_device())


@contextmanager
def rollout_engine(
    cfg: EngineCfg,
    model: torch.nn.Module,
    pad_id: int,
    precision: str,
    max_batch: int,
    routing_replay: bool = False,
) -> Iterator[Engine]:
    """An RL stage's rollout engine (its `engine:`, through `make_engine`) holding `model`'s
    weights, closed on exit (a vLLM server it started stops with it)."""
    engine = make_engine(
        cfg,
        plain_model(model),  # a LoRA model's merged copy, under the base model's names
        pad_token_id=pad_id,
        precision=precision,
        max_batch=max_batch,
        routing_replay=routing_replay,
    )
    try:
        yield engine
    finally:
        close = getattr(engine, "close", None)  # the LocalEngine holds nothing to release
        if close is not None:
            close()


def trainer_options(ctx: RunContext, stage: StageCfg, label: str) -> dict[str, Any]:
    """The keyword arguments an on-policy trainer (`train_rl`, `train_distill`) takes from the
    run: the tokenizer's pad and stop ids, the progress label (`label` and the stage's name),
    the run's logging sinks and the run name its trackers show."""
    tok = ctx.tokenizer
    return {
        "pad_id": tok.pad_token_id or 0,
        "stop_ids": stop_token_ids(tok),
        "desc": f"{label} {stage.name}",
        "logging": ctx.cfg.logging,
        "run_name": f"{ctx.cfg.name}/{stage.name}",
    }


def row_mean(rows: list[dict], key: str) -> float:
    """The mean of `key` over metric rows (a row without it counts 0; 0 for no rows)."""
    return sum(row.get(key, 0.0) for row in rows) / max(1, len(rows))


def first_and_last_fifth(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The first and the last fifth of a stage's metric rows (at least one row each, when there
    are rows): where a stage summary reads how training started and ended."""
    k = max(1, len(rows) // 5)
    return rows[:k], rows[-k:]


def grpo_summary(stage: StageCfg, prompts: list, rows: list[dict]) -> dict[str, Any]:
    """The summary a GRPO stage (rl, general_rl) reports from `train_rl`'s metric rows: steps,
    prompt pool size, mean reward over the first and last fifth, groups dropped for uniform
    rewards, generation speed."""
    first, last = first_and_last_fifth(rows)
    return {
        "steps": stage.steps,
        "prompts": len(prompts),
        "reward_first": row_mean(first, "reward_mean"),
        "reward_last": row_mean(last, "reward_mean"),
        "dropped_uniform": sum(row["dropped_uniform"] for row in rows),
        "tokens_per_s": row_mean(rows, "tokens_per_s"),
    }
