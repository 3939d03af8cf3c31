"""The SFT stage: its config (`SFTStageCfg`) and runner, sources → conversations →
chat-template encoding → `train_sft`. `trainer: {backend: fsdp2}` shards the training over
torchrun ranks (arcforge.train.fsdp); the checkpoint is one save_pretrained directory either way."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from arcforge.config import LoraCfg, OptimCfg, SourceCfg, StageCfg
from arcforge.errors import UserError
from arcforge.stages.common import model_for_stage
from arcforge.stages.context import RunContext
from arcforge.stages.world_source import run_records
from arcforge.train.fsdp import TrainerCfg, export_hf
from arcforge.train.lora import save_stage_model
from arcforge.train.sft import Conversation, encode_conversations, train_sft
from arcforge.types import Message, Tool


class SFTStageCfg(StageCfg):
    """Supervised fine-tuning on message lists with the chat template's loss mask."""

    kind: Literal["sft"]
    sources: list[SourceCfg]
    max_len: int = Field(512, gt=8)
    batch_size: int = Field(16, gt=0)
    epochs: float = Field(3.0, gt=0)
    optim: OptimCfg = OptimCfg(lr=1e-3, warmup_steps=10)
    precision: Literal["fp32", "bf16"] = "fp32"  # as in LMStageCfg
    preserve_thinking: bool = False
    # single: this process; fsdp2: sharded over the ranks of `arcforge run --nproc N`
    trainer: TrainerCfg = Field(default_factory=TrainerCfg)
    lora: LoraCfg | None = None  # LoRA adapters (arcforge.train.lora); null: full fine-tuning

    @model_validator(mode="after")
    def _lora_single(self) -> SFTStageCfg:
        if self.lora is not None and self.trainer.backend == "fsdp2":
            raise ValueError("lora: trainer backend fsdp2 does not shard a LoRA model; use single")
        return self


# ---- the runner ----------------------------------------------------------------------------


def _tools(schemas: list, origin: str) -> list[Tool]:
    """Tool schemas of a record: flat ({name, description, parameters}) or OpenAI-shaped
    ({"type": "function", "function": {...}}, as GEM writes them)."""
    out = []
    for t in schemas:
        f = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise UserError(f"{origin}: a tool schema needs a 'name': {str(t)[:120]}")
        out.append(Tool(f["name"], f.get("description", ""), f.get("parameters", {})))
    return out


def _conversations(ctx: RunContext, stage: SFTStageCfg) -> list[Conversation]:
    tools = ctx.world.tools()
    convs = []
    for s in stage.sources:
        for r in run_records(ctx, s.source):
            if r.messages is None:
                if r.prompt is None:
                    continue
                r.messages = [
                    Message(role="user", content=r.prompt),
                    Message(role="assistant", content=r.answer or ""),
                ]
            names = r.meta.get("tools", [])
            mode = r.meta.get("mode")
            # expert episodes carry their environment's tool schemas (bash, python, ...)
            schemas = r.meta.get("tool_schemas")
            offered = (
                _tools(schemas, r.origin) if schemas else [tools[n] for n in names if n in tools]
            )
            convs.append(Conversation(r.messages, offered, True if mode == "preserved" else None))
    return convs


def run_sft_stage(ctx: RunContext, stage: SFTStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    examples, counts = encode_conversations(
        _conversations(ctx, stage), tok, stage.max_len, stage.preserve_thinking
    )
    if not examples:
        raise UserError(f"stage {stage.name!r}: its sources gave no trainable conversation")
    res = train_sft(
        model,
        examples,
        stage,
        out,
        pad_id=tok.pad_token_id or 0,
        trainer=stage.trainer,
        logging=ctx.cfg.logging,
        run_name=f"{ctx.cfg.name}/{stage.name}",
    )
    meta = {"stage": stage.name}
    save_stage_model(model, tok, out / "checkpoint", meta, stage.lora, save=export_hf)
    return {
        "steps": res.steps,
        "final_loss": res.final_loss,
        "examples": counts["kept"],
        "truncated": counts["truncated"],
        "cut_turns_untrained": counts["cut_turns_untrained"],
        "dropped": counts["dropped_no_target"],
        "tokens_per_s": res.tokens / max(1e-9, res.seconds),
    }
