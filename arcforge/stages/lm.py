"""Pretraining and mid-training stages: their config (`LMStageCfg`) and runner.

Curates text sources, packs a weighted mixture per context phase (one phase per mid-training
context stage, with its RoPE base set on entry) and trains with `train_lm`. Finishes with a
save_pretrained checkpoint plus the tokenizer. `git:<path>` sources give repo-level sequences
of a local git repository. Optional synthetic copy rows (arcforge/data/copy_rows.py) make a
first phase (`copy_warmup_steps`) and/or part of every batch (`copy_rows`).

Options: `mtp:` trains a multi-token-prediction head beside the model (arcforge.model.mtp; it
continues the init checkpoint's head when there is one), optionally self-distils it on the
model's own greedy text (`mtp.align_steps`), and saves it as `mtp.safetensors` in the
checkpoint; `dsa:` (mid-training, models with DSA indexers) runs DSA's dense warm-up and
sparse phases (arcforge.train.dsa) after the context schedule, on the last phase's batches,
logging to `dsa_metrics.jsonl`; `trainer: {backend: fsdp2}` shards the training over torchrun
ranks (arcforge.train.fsdp), rank 0 writing the stage's files.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator

from arcforge.config import LoraCfg, OptimCfg, SourceCfg, StageCfg, Strict
from arcforge.data.copy_rows import copy_rows, plain_token_ids
from arcforge.data.curate import curate
from arcforge.data.midtrain import git_repo_sequences
from arcforge.data.packing import HELDOUT_SEQ_LEN, PackedDataset, pack, tokenize_docs
from arcforge.data.sources import Record
from arcforge.errors import UserError
from arcforge.metrics import JsonlSink
from arcforge.model.checkpoint import set_max_positions, set_rope_theta
from arcforge.model.mtp import MTPHead, has_mtp, load_mtp, save_mtp
from arcforge.rollout.engines.mtp_align import align_on_own_text
from arcforge.stages.common import is_main_rank, model_for_stage
from arcforge.stages.context import RunContext
from arcforge.stages.world_source import run_records
from arcforge.train.dsa import DsaCfg, DsaResult, dsa_attentions, run_dsa_phases
from arcforge.train.fsdp import TrainerCfg, export_hf
from arcforge.train.lm import heldout_loss, train_lm
from arcforge.train.loop import Phase
from arcforge.train.lora import save_stage_model


class ContextStageCfg(Strict):
    """One mid-training context stage: train `tokens` tokens at `seq_len` with RoPE base."""

    seq_len: int = Field(gt=8)
    tokens: int = Field(gt=0)
    rope_theta: float = Field(10000.0, gt=0)


class MTPCfg(Strict):
    """A multi-token-prediction head trained with the LM loss (arcforge.model.mtp)."""

    draft_steps: int = Field(2, ge=1)  # depths trained = speculative draft tokens per round
    weight: float = Field(0.3, ge=0)  # lambda: loss = LM + lambda * MTP
    # after training, self-distil the head on the model's own greedy continuations of
    # training-batch prefixes (arcforge.model.mtp.align_mtp; raises speculative acceptance)
    align_steps: int = Field(0, ge=0)
    align_lr: float = Field(1e-3, gt=0)


class LMStageCfg(StageCfg):
    """Pretraining / mid-training: packed next-token prediction."""

    kind: Literal["pretrain", "midtrain"]
    sources: list[SourceCfg]
    seq_len: int = Field(128, gt=8)
    tokens_per_batch: int = Field(4096, gt=0)
    tokens: int = Field(2_000_000, gt=0)  # total tokens when no context_schedule is given
    context_schedule: list[ContextStageCfg] = []
    optim: OptimCfg = OptimCfg()
    # "bf16": forward/backward under bf16 autocast (weights, gradients and optimizer stay
    # fp32), for GPUs; not bit-identical to fp32. On CPUs without native bf16 it is much
    # slower than fp32 (docs/experiments.md, "GPU")
    precision: Literal["fp32", "bf16"] = "fp32"
    curate: bool = True
    # synthetic copy rows (arcforge/data/copy_rows.py): a first phase of `copy_warmup_steps`
    # steps made only of them (added to `tokens`), then this fraction of every batch (within it)
    copy_warmup_steps: int = Field(0, ge=0)
    copy_rows: float = Field(0.0, ge=0.0, lt=1.0)
    heldout_every: int = Field(50, gt=0)
    heldout_docs: int = Field(64, gt=0)
    mtp: MTPCfg | None = None  # train an MTP head alongside (saved beside the HF weights)
    # mid-training only, models with DSA indexers (glm5-* presets): DSA's warm-up + sparse phases
    dsa: DsaCfg | None = None
    # single: this process; fsdp2: sharded over the ranks of `arcforge run --nproc N`
    trainer: TrainerCfg = Field(default_factory=TrainerCfg)
    lora: LoraCfg | None = None  # LoRA adapters (arcforge.train.lora); null: full training

    @model_validator(mode="after")
    def _options_fit(self) -> LMStageCfg:
        if self.lora is not None and self.trainer.backend == "fsdp2":
            raise ValueError("lora: trainer backend fsdp2 does not shard a LoRA model; use single")
        if self.lora is not None and (self.mtp is not None or self.dsa is not None):
            raise ValueError("lora: the mtp and dsa options train full weights; drop lora or them")
        if self.dsa is not None and self.kind != "midtrain":
            raise ValueError(
                f"dsa: DSA's warm-up and sparse phases belong to a midtrain stage, not {self.kind}"
            )
        sharded = self.trainer.backend == "fsdp2"
        if sharded and self.dsa is not None:
            raise ValueError("dsa: the DSA phases run in one process; use trainer backend single")
        if sharded and self.mtp is not None:
            raise ValueError(
                "mtp: trainer backend fsdp2 does not train an MTP head; use backend single"
            )
        return self

    @field_validator("context_schedule")
    @classmethod
    def _non_decreasing(cls, v: list[ContextStageCfg]) -> list[ContextStageCfg]:
        for a, b in zip(v, v[1:]):
            if b.seq_len < a.seq_len:
                raise ValueError("context_schedule seq_len must not decrease")
        return v


# ---- the runner ----------------------------------------------------------------------------


def _source_texts(
    ctx: RunContext, spec: str, tokenizer=None, world_tools: dict | None = None
) -> list[str]:
    if spec.startswith("git:"):
        path = Path(spec[4:])
        if not (path / ".git").exists():
            raise UserError(f"source {spec!r}: {path} is not a git repository")
        return git_repo_sequences(path)
    recs = run_records(ctx, spec)
    return [
        r.text if r.text is not None else _record_as_text(r, tokenizer, world_tools) for r in recs
    ]


def _record_as_text(r: Record, tokenizer=None, world_tools: dict | None = None) -> str:
    """A chat record as the model reads it: rendered through the tokenizer's chat format (the
    checkpoint's own template, or arcforge's), with its tool schemas, tool calls and reasoning
    kept, so that agentic mid-training shows trajectories in the form SFT and RL use."""
    if r.messages is not None:
        if tokenizer is None:
            return "\n".join(f"{m.role}: {m.content}" for m in r.messages)
        from arcforge.chat.encoding import render_ids
        from arcforge.stages.sft import _tools

        schemas, names = r.meta.get("tool_schemas"), r.meta.get("tools") or []
        known = world_tools or {}
        tools = _tools(schemas, r.origin) if schemas else [known[n] for n in names if n in known]
        tools = tools or None
        ids = render_ids(r.messages, tokenizer, tools=tools).input_ids
        return tokenizer.decode(ids)
    return f"{r.prompt}\n{r.answer or ''}"


def mixed_rows(
    streams: list[list[int]], weights: list[float], seq_len: int, n_rows: int, seed: int
) -> torch.Tensor:
    """(n_rows, seq_len+1) rows drawn from each source's packed rows in proportion to weight."""
    total_w = sum(weights)
    # largest-remainder quotas: they sum to n_rows exactly (rounding each share alone can
    # leave a batch short a row), every source at least one
    exact = [n_rows * w / total_w for w in weights]
    quota = [max(1, math.floor(x)) for x in exact]
    for j in sorted(range(len(exact)), key=lambda j: exact[j] - math.floor(exact[j]), reverse=True):
        if sum(quota) >= n_rows:
            break
        quota[j] += 1
    out = []
    for i, (stream, k) in enumerate(zip(streams, quota)):
        rows = pack(stream, seq_len)  # (N_i, T+1)
        if len(rows) == 0:
            raise UserError(f"source #{i} has fewer than {seq_len + 1} tokens at seq_len {seq_len}")
        g = torch.Generator().manual_seed(seed + 17 * i)
        reps = math.ceil(k / len(rows))
        idx = torch.cat([torch.randperm(len(rows), generator=g) for _ in range(reps)])[:k]
        out.append(rows[idx])
    return torch.cat(out)


def run_lm_stage(ctx: RunContext, stage: LMStageCfg, out: Path) -> dict:
    tok = ctx.tokenizer
    model = model_for_stage(ctx, stage)
    if stage.dsa is not None and not dsa_attentions(model):  # before training, not after
        raise UserError(
            f"stage {stage.name!r}: dsa: the model has no DSA indexer (use a glm5-* model preset)"
        )
    streams, weights, curation = [], [], {}
    for s in stage.sources:
        needs_world = s.source.startswith("world:")
        texts = _source_texts(ctx, s.source, tok, ctx.world.tools() if needs_world else None)
        if stage.curate and s.source.startswith("world:corpus"):
            kept, rep = curate(texts)
            curation[s.source] = {"in": rep.n_in, "kept": rep.n_kept, **rep.counts}
            texts = kept
        streams.append(tokenize_docs(texts, tok))
        weights.append(s.weight)
    held_docs = [d.text for d in ctx.world.heldout_corpus()[: stage.heldout_docs * 4]]
    held = pack(tokenize_docs(held_docs, tok), HELDOUT_SEQ_LEN)[: stage.heldout_docs]
    phases = build_phases(stage, streams, weights, plain_token_ids(tok))
    mtp = _mtp_head(ctx, stage, model)
    res = train_lm(
        model,
        phases,
        stage.optim,
        out,
        heldout=lambda m: heldout_loss(m, held),
        mtp=mtp,
        mtp_weight=stage.mtp.weight if stage.mtp else 0.0,
        log_every=stage.log_every,
        checkpoint_every=stage.checkpoint_every,
        heldout_every=stage.heldout_every,
        desc=f"{stage.kind} {stage.name}",
        precision=stage.precision,
        trainer=stage.trainer,
        logging=ctx.cfg.logging,
        run_name=f"{ctx.cfg.name}/{stage.name}",
    )
    dsa = _dsa_phases(stage, model, phases[-1], out) if stage.dsa else None
    align = None
    if mtp is not None and stage.mtp.align_steps:
        align = _align_mtp(stage, model, mtp, phases[-1], tok.pad_token_id)
    final_held = heldout_loss(model, held)
    meta = {"stage": stage.name}
    save_stage_model(model, tok, out / "checkpoint", meta, stage.lora, save=export_hf)
    if mtp is not None:  # after the export, which replaces the directory
        save_mtp(mtp, out / "checkpoint")
    if is_main_rank():
        (out / "curation.json").write_text(json.dumps(curation, indent=1))
    extra = {}
    if dsa is not None:
        extra = {"dsa_warmup_kl": _ends(dsa.warmup_kl), "dsa_sparse_kl": _ends(dsa.sparse_kl)}
    if align is not None:
        extra["mtp_align_kl"] = _ends(align)
    return {
        "steps": res.steps,
        "final_loss": res.final_loss,
        "heldout_loss": final_held,
        "tokens": res.tokens,
        "tokens_per_s": res.tokens / max(1e-9, res.seconds),
        "context": [c.seq_len for c in stage.context_schedule] or [stage.seq_len],
        "curation": curation,
        **extra,
    }


ALIGN_PROMPTS, ALIGN_PREFIX = 64, 16  # greedy continuations the MTP head is aligned on


def _align_mtp(
    stage: LMStageCfg, model: torch.nn.Module, mtp: MTPHead, phase: Phase, pad_id: int
) -> list[float]:
    """`align_on_own_text` from `ALIGN_PROMPTS` prefixes of the last phase's training rows, as
    long as those rows; returns the per-step KL."""
    prefixes: list[list[int]] = []
    step = 0
    while len(prefixes) < ALIGN_PROMPTS:
        ids = phase.batch_fn(step)  # (B, T+1) packed training tokens
        prefixes += [row[:ALIGN_PREFIX].tolist() for row in ids[:, :-1]]
        step += 1
    cfg = stage.mtp
    try:
        return align_on_own_text(
            model,
            mtp,
            prefixes[:ALIGN_PROMPTS],
            ids.shape[1] - 1,
            pad_id,
            cfg.align_steps,
            lr=cfg.align_lr,
            seed=stage.seed,
        )
    except ValueError as err:
        raise UserError(f"stage {stage.name!r}: mtp.align_steps: {err}") from None


def _mtp_head(ctx: RunContext, stage: LMStageCfg, model: torch.nn.Module) -> MTPHead | None:
    """The stage's MTP head: the init checkpoint's when it has one (trained on for
    `stage.mtp.draft_steps` depths; the depths share one layer), else a new one."""
    if stage.mtp is None:
        return None
    init = ctx.init_checkpoint(stage)
    if init is not None and has_mtp(init):
        mtp = load_mtp(init, model.config)
        mtp.draft_steps = stage.mtp.draft_steps
        return mtp
    return MTPHead(model.config, stage.mtp.draft_steps)


def _dsa_phases(stage: LMStageCfg, model: torch.nn.Module, last: Phase, out: Path) -> DsaResult:
    """DSA's warm-up and sparse phases on the last context phase's batches (cycled), one row per
    step in `dsa_metrics.jsonl`."""
    assert stage.dsa is not None
    sink = JsonlSink(out / "dsa_metrics.jsonl")
    return run_dsa_phases(
        model,
        lambda step: last.batch_fn(step % last.steps),
        stage.dsa,
        optim=stage.optim,
        log=lambda row: sink.log(row["step"], {k: v for k, v in row.items() if k != "step"}),
    )


def _ends(curve: list[float]) -> list[float]:
    """[first, last] of a curve ([] when it is empty)."""
    return [curve[0], curve[-1]] if curve else []


def build_phases(
    stage: LMStageCfg, streams: list[list[int]], weights: list[float], copy_ids: torch.Tensor
) -> list[Phase]:
    """The stage's loop phases: an optional copy warm-up, then one per context stage.

    Every batch is a pure function of its step (exact resume), `copy_rows` of it synthetic copy
    rows drawn from `copy_ids` when the stage asks for them.
    """
    schedule = stage.context_schedule or [
        type("C", (), {"seq_len": stage.seq_len, "tokens": stage.tokens, "rope_theta": None})()
    ]
    phases = []
    if stage.copy_warmup_steps:
        seq0 = schedule[0].seq_len
        bs0 = max(1, stage.tokens_per_batch // seq0)
        phases.append(
            Phase(
                stage.copy_warmup_steps,
                lambda step: copy_rows(bs0, seq0, copy_ids, _copy_seed(stage.seed, -1, step)),
                name="copy",
            )
        )
    for i, cs in enumerate(schedule):
        bs = max(1, stage.tokens_per_batch // cs.seq_len)
        k = min(bs - 1, round(bs * stage.copy_rows))  # copy rows per batch
        steps = max(1, cs.tokens // (bs * cs.seq_len))
        rows = mixed_rows(streams, weights, cs.seq_len, steps * (bs - k), stage.seed + i)
        ds = PackedDataset(rows)
        hook = _context_hook(cs.seq_len, cs.rope_theta) if cs.rope_theta else None

        def batch_fn(step: int, ds=ds, bs=bs, k=k, i=i, seq=cs.seq_len) -> torch.Tensor:
            b = ds.batch(step, bs - k, stage.seed)
            if not k:
                return b
            return torch.cat([b, copy_rows(k, seq, copy_ids, _copy_seed(stage.seed, i, step))])

        phases.append(Phase(steps, batch_fn, on_enter=hook, name=f"ctx{cs.seq_len}"))
    return phases


def _copy_seed(seed: int, phase: int, step: int) -> int:
    return (seed * 1_000_003 + (phase + 1) * 10_000_019 + step) % (2**63)


def _context_hook(seq_len: int, theta: float):
    def hook(model: torch.nn.Module) -> None:
        set_rope_theta(model, theta)
        if model.config.max_position_embeddings < seq_len:
            set_max_positions(model, seq_len)

    return hook
