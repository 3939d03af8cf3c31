"""Distillation stage runner: teacher checkpoints + their sources → `train_distill` → checkpoint.

A teacher's `checkpoint` is a stage name of this run (its `checkpoint/` dir) or a path to any
checkpoint dir written with the same tokenizer. Each teacher's prompts come from its own sources
(rendered like the RL stage's); the student starts from the stage's init checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from arcforge.config import STAGE_CONFIGS
from arcforge.errors import UserError
from arcforge.model.checkpoint import load_model, save_checkpoint
from arcforge.pipeline import RunContext, register_stage
from arcforge.rollout.engine import LocalEngine
from arcforge.stages.common import model_for_stage
from arcforge.stages.rl import load_prompt_records
from arcforge.train.distill import DistillStageCfg, Teacher, train_distill
from arcforge.train.rl import prompt_from_record, stop_token_ids

STAGE_CONFIGS["distill"] = DistillStageCfg


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


@register_stage("distill")
def run_distill_stage(ctx: RunContext, stage: DistillStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    ctx.world  # noqa: B018  (registers the world: resolver)
    student = model_for_stage(ctx, stage)
    teachers = []
    for i, t in enumerate(stage.teachers):
        recs = load_prompt_records(t.sources, stage.seed + i, stage.name)
        teachers.append(
            Teacher(
                load_model(teacher_dir(ctx, t.checkpoint)),
                [prompt_from_record(r, tok, stage.thinking) for r in recs],
                t.ratio,
                name=t.checkpoint,
            )
        )
    pad = tok.pad_token_id or 0
    engine = LocalEngine(
        student,
        pad_token_id=pad,
        precision=stage.engine_precision,
        max_batch=max(64, stage.prompts_per_step),
    )
    rows = train_distill(
        student,
        engine,
        teachers,
        stage,
        out,
        pad_id=pad,
        stop_ids=stop_token_ids(tok),
        desc=f"distill {stage.name}",
    )
    save_checkpoint(student, tok, out / "checkpoint", extra={"stage": stage.name})
    k = max(1, len(rows) // 5)
    return {
        "steps": stage.steps,
        "teachers": [t.checkpoint for t in stage.teachers],
        "kl_first": sum(r["kl_to_teacher"] for r in rows[:k]) / k,
        "kl_last": sum(r["kl_to_teacher"] for r in rows[-k:]) / k,
        "tokens_per_s": sum(r["tokens_per_s"] for r in rows) / max(1, len(rows)),
    }
