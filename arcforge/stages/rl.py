"""The reasoning-RL stage: its config (`RLStageCfg`) and runner, sources → chat prompts →
`train_rl` on the stage's rollout engine (`engine:`, the in-process LocalEngine by default) →
checkpoint.

Sources are the usual specs (`world:reasoning`, `jsonl:...`) plus `reasoning_gym:<name>`;
records from several sources are mixed by weight. Prompts are rendered with the chat template
(one user turn, thinking on), replies are scored by `arcforge.rewards.registry` by task kind.
`routing_replay` (an MoE policy, `engine.kind: local`) replays each completion's rollout routing
in the policy's training forwards (arcforge.train.rl).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from arcforge.config import OnPolicyStageCfg, SourceCfg
from arcforge.data.reasoning_gym import is_reasoning_gym, load_reasoning_gym
from arcforge.data.sources import Record, load_records, mix
from arcforge.errors import ConfigError, UserError
from arcforge.rollout.prompts import prompt_from_record, text_scorer
from arcforge.stages.common import (
    grpo_summary,
    model_for_stage,
    rollout_engine,
    row_mean,
    trainer_options,
)
from arcforge.stages.context import RunContext
from arcforge.stages.world_source import run_records
from arcforge.train.lora import save_stage_model
from arcforge.train.rl import train_rl


class RLStageCfg(OnPolicyStageCfg):
    """Reasoning RL on verifiable rewards (GRPO + IcePop); the loss fields are `LossCfg`'s."""

    kind: Literal["rl"]
    sources: list[SourceCfg]
    steps: int = Field(100, gt=0)
    prompts_per_step: int = Field(16, gt=0)
    group_size: int = Field(8, ge=2)
    temperature: float = Field(0.7, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    baseline: Literal["mean", "leave_one_out"] = "mean"
    std_normalize: bool = False
    max_refill_tries: int = Field(2, ge=0)
    thinking: bool = True  # render prompts with the thinking switch on
    # difficulty filter: keep tasks whose `difficulty` lies in [lo, hi] (tasks without one are
    # kept). RL only learns where the policy is partly right (a group of all-0 rewards has no
    # advantage), so the pool is cut to the band the starting checkpoint can partly solve.
    difficulty: tuple[float, float] | None = None
    # force each completion's rollout experts (MoE routers) in the policy's training forwards;
    # the LocalEngine records them, so it needs engine.kind local and a model with routers
    routing_replay: bool = False

    @model_validator(mode="after")
    def _replay_needs_local_engine(self) -> RLStageCfg:
        if self.routing_replay and self.engine.kind != "local":
            raise ValueError(
                f"routing_replay records the experts of the LocalEngine's own forwards; "
                f"engine.kind {self.engine.kind} does not return them: use engine.kind local"
            )
        return self


def in_band(record: Record, band: tuple[float, float] | None) -> bool:
    """True when the record's task difficulty lies in `band` (or it has none, or no band)."""
    d = record.task.difficulty if record.task is not None else None
    return band is None or d is None or band[0] <= d <= band[1]


def load_prompt_records(
    sources: list[SourceCfg],
    seed: int,
    name: str,
    band: tuple[float, float] | None = None,
    load: Callable[[str], list[Record]] = load_records,
) -> list[Record]:
    """Prompt/answer records of every source inside the difficulty `band` (a source's own
    `difficulty` replaces it), mixed by weight; `load` reads a source spec (a run's:
    `partial(run_records, ctx)`, which resolves `world:`)."""
    pools = []
    for s in sources:
        recs = load_reasoning_gym(s.source) if is_reasoning_gym(s.source) else load(s.source)
        cut = s.difficulty or band
        recs = [r for r in recs if r.prompt is not None and in_band(r, cut)]
        if not recs:
            why = f" in the difficulty band {list(cut)}" if cut else ""
            raise UserError(
                f"stage {name!r}: source {s.source!r} has no prompt/answer records{why}"
            )
        pools.append((s.weight, recs))
    return mix(pools, sum(len(r) for _, r in pools), seed)


def run_rl_stage(ctx: RunContext, stage: RLStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    if stage.routing_replay:
        from arcforge.model.moe import routers

        if not routers(model):
            raise ConfigError(
                f"stage {stage.name!r}: routing_replay needs a model with MoE routers (a glm5-* "
                f"preset); {model.config.model_type} has none"
            )
    load = partial(run_records, ctx)
    records = load_prompt_records(stage.sources, stage.seed, stage.name, stage.difficulty, load)
    prompts = [prompt_from_record(r, tok, stage.thinking) for r in records]
    pad = tok.pad_token_id or 0
    batch = max(64, stage.prompts_per_step * stage.group_size)
    engine_cm = rollout_engine(
        stage.engine, model, pad, stage.engine_precision, batch, stage.routing_replay
    )
    with engine_cm as engine:
        options = trainer_options(ctx, stage, "rl")
        rows = train_rl(model, engine, prompts, text_scorer(tok), stage, out, **options)
    save_stage_model(model, tok, out / "checkpoint", {"stage": stage.name}, stage.lora)
    return {
        **grpo_summary(stage, prompts, rows),
        "dropped_overlong": sum(r["dropped_overlong"] for r in rows),
        "popped_frac": row_mean(rows, "popped_frac"),
    }
