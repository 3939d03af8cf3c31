"""Outcome reward model training: preference pairs -> Bradley–Terry -> a saved `RewardModel`.

One step: draw `batch_size` pairs (a seeded permutation per epoch, so the order is a pure
function of the step), score chosen and rejected replies in one forward, take the BT loss
(`arcforge.rl.preference`), clip, AdamW step on backbone and head together. After the last step
the model's raw scores on its training replies give the normalization (center, scale), and the
pair accuracy on held-out pairs (prompts never seen in training) is measured and saved with it.
Deliberate simplification: ORM training is short and not resumable mid-run; an interrupted run
starts over (the general-RL stage reuses a finished ORM directory). Starting over gives the same
ORM bit for bit: the head's init (`RewardModel(seed=)`) and the batch order come from their own
seeded generators, never from the process's global RNG.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from arcforge.config import OptimCfg, SourceCfg, Strict
from arcforge.data.sources import Record, load_records
from arcforge.errors import UserError
from arcforge.metrics import LoggingCfg, MetricSink
from arcforge.progress import progress
from arcforge.rewards.orm import RewardModel
from arcforge.rl.preference import bradley_terry_loss
from arcforge.train.optim import build_optimizer, lr_at


class RewardModelCfg(Strict):
    """How to train an ORM (`arcforge train-rm`, or the general-RL stage's `orm.train`)."""

    sources: list[SourceCfg] = [SourceCfg(source="world:preferences")]
    heldout: str | None = "world:preferences:test"  # pairs for the held-out accuracy
    steps: int = Field(150, gt=0)
    batch_size: int = Field(16, gt=0)
    max_len: int = Field(256, gt=8)
    margin: float = Field(0.0, ge=0)
    seed: int = 0
    optim: OptimCfg = OptimCfg(lr=5e-4, warmup_steps=10, min_lr_ratio=0.1, weight_decay=0.0)


@dataclass
class Pair:
    prompt: str
    chosen: str
    rejected: str


def pairs_from_records(records: list[Record], where: str) -> list[Pair]:
    """Preference pairs of records that carry `chosen` / `rejected` (see arcforge.data.sources)."""
    out = [
        Pair(r.prompt or "", str(r.meta["chosen"]), str(r.meta["rejected"]))
        for r in records
        if "chosen" in r.meta and "rejected" in r.meta
    ]
    if not out:
        raise UserError(f"{where}: no preference pairs (records need prompt, chosen, rejected)")
    return out


def load_pairs(
    sources: list[SourceCfg], load: Callable[[str], list[Record]] = load_records
) -> list[Pair]:
    """The preference pairs of every source, read with `load` (a run's resolves `world:`)."""
    return [p for s in sources for p in pairs_from_records(load(s.source), s.source)]


def pair_accuracy(rm: RewardModel, pairs: list[Pair]) -> float:
    """Share of pairs where the chosen reply gets the higher raw score."""
    if not pairs:
        return float("nan")
    rc = rm.score([p.prompt for p in pairs], [p.chosen for p in pairs])
    rr = rm.score([p.prompt for p in pairs], [p.rejected for p in pairs])
    return sum(c > r for c, r in zip(rc, rr)) / len(pairs)


def _batch_indices(n: int, step: int, size: int, seed: int) -> list[int]:
    """Pairs of step `step`: consecutive slices of a seeded permutation per epoch."""
    out = []
    for i in range(step * size, (step + 1) * size):
        epoch, j = divmod(i, n)
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        out.append(int(torch.randperm(n, generator=g)[j]))
    return out


def train_reward_model(
    rm: RewardModel,
    pairs: list[Pair],
    cfg: RewardModelCfg,
    out_dir: Path | None = None,
    heldout: list[Pair] | None = None,
    desc: str = "train-rm",
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
) -> dict[str, Any]:
    """Train `rm` in place with the BT loss; returns a summary (losses, accuracies, seconds).

    Args:
        rm: the reward model (backbone + head) to train.
        pairs: training pairs; heldout: pairs for the held-out accuracy (optional).
        out_dir: where metrics.jsonl goes (None: not logged).
        logging: where metrics go besides metrics.jsonl (None: metrics.jsonl only).
        run_name: the name W&B / trackio show for this run (default: out_dir's name).
    """
    if not pairs:
        raise UserError("train-rm: no training pairs")
    opt = build_optimizer(rm, cfg.optim)
    sink = MetricSink(logging or LoggingCfg(), out_dir, name=run_name) if out_dir else None
    t0, rows = time.time(), []
    rm.train()
    with sink or nullcontext(), progress(cfg.steps, desc) as bar:
        for step in range(cfg.steps):
            batch = [pairs[i] for i in _batch_indices(len(pairs), step, cfg.batch_size, cfg.seed)]
            B = len(batch)
            ids, mask = rm.batch(
                [p.prompt for p in batch] * 2,
                [p.chosen for p in batch] + [p.rejected for p in batch],
            )
            r = rm(ids, mask)  # (2B,): chosen then rejected
            loss, st = bradley_terry_loss(r[:B], r[B:], cfg.margin)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, cfg.steps, cfg.optim)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gn = float(torch.nn.utils.clip_grad_norm_(rm.parameters(), cfg.optim.grad_clip))
            opt.step()
            row = {
                "step": step + 1,
                "loss": loss.item(),
                **st,
                "grad_norm": gn,
                "lr": opt.param_groups[0]["lr"],
            }
            rows.append(row)
            if sink:
                sink.log(step + 1, row)
            bar.update(step + 1, loss=row["loss"], acc=row["accuracy"])
    rm.eval()
    sample = pairs[: min(len(pairs), 256)]
    raw = rm.score(
        [p.prompt for p in sample] * 2, [p.chosen for p in sample] + [p.rejected for p in sample]
    )
    rm.center, rm.scale = statistics.fmean(raw), max(1e-3, statistics.pstdev(raw))
    k = max(1, len(rows) // 5)
    summary = {
        "steps": cfg.steps,
        "pairs": len(pairs),
        "loss_first": statistics.fmean(r["loss"] for r in rows[:k]),
        "loss_last": statistics.fmean(r["loss"] for r in rows[-k:]),
        "train_accuracy": pair_accuracy(rm, sample),
        "heldout_pairs": len(heldout or []),
        "heldout_accuracy": pair_accuracy(rm, heldout or []),
        "seconds": time.time() - t0,
    }
    rm.meta = {**rm.meta, "training": summary}
    return summary


def train_rm_from_checkpoint(
    checkpoint: Path,
    cfg: RewardModelCfg,
    out: Path,
    desc: str = "train-rm",
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
    load: Callable[[str], list[Record]] = load_records,
) -> dict[str, Any]:
    """Load a causal-LM checkpoint, add a head, train on cfg's sources (read with `load`), save
    to `out`."""
    from arcforge.model.checkpoint import load_model
    from arcforge.model.tokenizer import load_tokenizer

    if not (checkpoint / "config.json").is_file():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    pairs = load_pairs(cfg.sources, load)
    heldout = pairs_from_records(load(cfg.heldout), cfg.heldout) if cfg.heldout else []
    tok, _ = load_tokenizer(checkpoint)
    rm = RewardModel(load_model(checkpoint), tok, cfg.max_len, seed=cfg.seed)
    summary = train_reward_model(rm, pairs, cfg, out, heldout, desc, logging, run_name)
    rm.save(out, extra={"base": str(checkpoint)})
    (out / "DONE").write_text("ok\n")
    return summary
