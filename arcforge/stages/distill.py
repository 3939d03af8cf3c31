"""The distillation stage: its config (`DistillStageCfg`) and runner, teacher checkpoints +
their sources → `train_distill` (the student rolls out on the stage's `engine:`) → checkpoint.

A teacher's `checkpoint` is a stage name of this run (its `checkpoint/` dir) or a path to any
checkpoint dir written with the same tokenizer. Each teacher's prompts come from its own sources
(rendered like the RL stage's); the student starts from the stage's init checkpoint.

A prompt of an agent task (tool, TIR, search, code, terminal, ...) is the first model input of
that task's episode: its environment's opening messages and tools (`first_prompt_ids`), so a
TIR teacher is asked with the python tool offered, as in the agent loop and the tir suite.
Math and chat prompts are one user turn.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from arcforge.config import RolloutISStageCfg, SourceCfg, Strict
from arcforge.data.sources import Record
from arcforge.envs.registry import FACTORIES, env_factory
from arcforge.errors import UserError
from arcforge.model.checkpoint import load_model
from arcforge.rollout.agent import AgentConfig, first_prompt_ids
from arcforge.rollout.prompts import RLPrompt, prompt_from_record
from arcforge.stages.common import (
    first_and_last_fifth,
    model_for_stage,
    rollout_engine,
    row_mean,
    trainer_options,
)
from arcforge.stages.context import RunContext
from arcforge.stages.rl import load_prompt_records
from arcforge.stages.world_source import run_records
from arcforge.train.distill import Teacher, train_distill
from arcforge.train.lora import save_stage_model


class TeacherCfg(Strict):
    """A teacher: a stage name of this run (or a checkpoint dir) and the sources it owns."""

    checkpoint: str
    sources: list[SourceCfg]
    ratio: float = Field(1.0, gt=0)


class DistillStageCfg(RolloutISStageCfg):
    """On-policy distillation from earlier stage checkpoints (group size 1); the loss fields
    are `LossCfg`'s (the IS trust region [1 - clip_low, 1 + clip_high]); `engine` is the
    student's rollout engine."""

    trainer: ClassVar[str] = "distillation"
    kind: Literal["distill"]
    teachers: list[TeacherCfg] = Field(min_length=1)
    steps: int = Field(100, gt=0)
    prompts_per_step: int = Field(32, gt=0)
    icepop_beta: float | None = Field(None, gt=1)  # not read by double_sided_is
    thinking: bool = True


def teacher_dir(ctx: RunContext, ref: str) -> Path:
    """A stage name of this run, else a checkpoint path."""
    names = [s.name for s in ctx.cfg.stages]
    path = ctx.checkpoint(ref) if ref in names else Path(ref)
    if not (path / "config.json").exists():
        raise UserError(
            f"teacher {ref!r}: no checkpoint at {path} (run that stage first, "
            "or give a checkpoint directory)"
        )
    return path


def teacher_prompts(records: list[Record], tokenizer, thinking: bool, world) -> list[RLPrompt]:
    """Prompts for a teacher's records: agent tasks as their episodes open, others one turn."""
    tools, make = world.tools(), env_factory(world)
    cfg = AgentConfig(turn_thinking=thinking)
    out = []
    for r in records:
        task = r.task
        if task is None or task.kind == "math" or task.kind not in FACTORIES:
            out.append(prompt_from_record(r, tokenizer, thinking, tools))
            continue
        env = None
        try:
            env = make(task)
            out.append(RLPrompt(first_prompt_ids(task, env, tokenizer, cfg), task))
        except ValueError as err:  # a task its environment cannot open
            raise UserError(f"{r.origin}: {err}") from None
        finally:
            if env is not None:
                env.close()
    return out


def run_distill_stage(ctx: RunContext, stage: DistillStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    student = model_for_stage(ctx, stage)
    teachers = []
    for i, t in enumerate(stage.teachers):
        load = partial(run_records, ctx)
        recs = load_prompt_records(t.sources, stage.seed + i, stage.name, load=load)
        teachers.append(
            Teacher(
                load_model(teacher_dir(ctx, t.checkpoint)),
                teacher_prompts(recs, tok, stage.thinking, ctx.world),
                t.ratio,
                name=t.checkpoint,
            )
        )
    pad = tok.pad_token_id or 0
    batch = max(64, stage.prompts_per_step)
    with rollout_engine(stage.engine, student, pad, stage.engine_precision, batch) as engine:
        options = trainer_options(ctx, stage, "distill")
        rows = train_distill(student, engine, teachers, stage, out, **options)
    save_stage_model(student, tok, out / "checkpoint", {"stage": stage.name}, stage.lora)
    first, last = first_and_last_fifth(rows)
    return {
        "steps": stage.steps,
        "teachers": [t.checkpoint for t in stage.teachers],
        "kl_first": row_mean(first, "kl_to_teacher"),
        "kl_last": row_mean(last, "kl_to_teacher"),
        "tokens_per_s": row_mean(rows, "tokens_per_s"),
    }
