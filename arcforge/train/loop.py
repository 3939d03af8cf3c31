"""The supervised training loop shared by pretraining, mid-training and SFT, with exact resume.

One function, `train_loop`: for each step, fetch the step's batch (a pure function of the step
index, so a resumed run sees exactly the batches it would have seen), compute the loss, clip,
step the optimizer, set the warmup + cosine learning rate (both arcforge.train.optim), log, and
every `checkpoint_every` steps write a resumable state (weights, optimizer moments, step, RNG
states; arcforge.train.resume) atomically. A run killed at any point and restarted continues
from the last state with no repeated or skipped batch; metric lines written after that state
are dropped on resume so the log has no duplicates.

Phases let mid-training change the context length and RoPE base mid-run: each phase has its own
step count, batch function and an `on_enter(model)` hook that is re-applied on resume.

`trainer=TrainerCfg(backend="fsdp2")` runs the same loop on every rank of a torchrun launch
(arcforge.train.fsdp): the model is sharded, each rank trains on its share of each batch's rows
with the loss weighted to the global token mean, checkpoints are sharded (DCP), and only rank 0
logs and draws progress.

Metrics go through `arcforge.metrics.MetricSink` (metrics.jsonl always, plus the sinks the run's
`logging:` names). On a model with MoE routers every logged row carries the expert-load
statistics of its step (`arcforge.model.moe.load_stats`: `moe_imbalance_max`/`_mean`/`_l<i>`,
`moe_idle_experts`), counted over the step's training forwards only (held-out losses run in eval
mode and are not counted; with FSDP2, rank 0's share of the rows). With `optim.moe_bias_gamma` >
0 an `AuxFreeBalancer` also moves each router's expert bias after every optimizer step, from
the same counts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from arcforge.config import OptimCfg
from arcforge.device import model_device, to_device
from arcforge.errors import ConfigError
from arcforge.metrics import LoggingCfg, MetricSink
from arcforge.model.moe import AuxFreeBalancer, ExpertLoad, routers
from arcforge.progress import progress
from arcforge.train.fsdp import (
    TrainerCfg,
    global_mean,
    grad_norm_value,
    shard_for_training,
    shard_rows,
)
from arcforge.train.optim import build_optimizer, lr_at
from arcforge.train.resume import TrainerState

Batch = Any
LossFn = Callable[[torch.nn.Module, Batch], tuple[torch.Tensor, int]]  # (loss, n_tokens)


@dataclass
class Phase:
    """A run of `steps` steps that draw batches from `batch_fn(step_in_phase)`."""

    steps: int
    batch_fn: Callable[[int], Batch]
    on_enter: Callable[[torch.nn.Module], None] | None = None
    name: str = ""


@dataclass
class LoopResult:
    steps: int
    final_loss: float
    tokens: int
    seconds: float
    resumed_from: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


def _locate(phases: list[Phase], step: int) -> tuple[int, int]:
    for i, ph in enumerate(phases):
        if step < ph.steps:
            return i, step
        step -= ph.steps
    return len(phases) - 1, phases[-1].steps


def _balancer(
    model: torch.nn.Module, load: ExpertLoad | None, optim: OptimCfg, sharded: bool
) -> AuxFreeBalancer | None:
    """The aux-loss-free MoE balancer `optim.moe_bias_gamma` asks for, over the loop's expert
    counts `load` (None when off or the model has no router)."""
    if not optim.moe_bias_gamma or load is None:
        return None
    if sharded:
        raise ConfigError(
            "optim.moe_bias_gamma: the aux-loss-free balancer counts one process's tokens, so "
            "FSDP2 ranks would move their router biases apart; set it to 0 with trainer fsdp2"
        )
    return AuxFreeBalancer(model, optim.moe_bias_gamma, load=load)


def train_loop(
    model: torch.nn.Module,
    phases: list[Phase],
    loss_fn: LossFn,
    optim: OptimCfg,
    out_dir: Path,
    *,
    log_every: int = 10,
    checkpoint_every: int = 50,
    heldout_fn: Callable[[torch.nn.Module], float] | None = None,
    heldout_every: int = 50,
    desc: str = "train",
    stop_after: int | None = None,
    precision: str = "fp32",
    trainer: TrainerCfg | None = None,
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
) -> LoopResult:
    """Train `model` through `phases`, resuming from `out_dir/state` when it exists.

    Args:
        loss_fn: (model, batch) -> (mean loss over trained tokens, number of trained tokens).
        heldout_fn: optional held-out loss, logged every `heldout_every` steps and at the end.
        stop_after: stop (after checkpointing) once this many steps are done; for tests.
        precision: "bf16" computes the loss under bf16 autocast (parameters stay fp32).
        trainer: backend fsdp2 shards `model` in place across the torchrun ranks (it stays
            sharded: save it with arcforge.train.fsdp.export_hf); None or single: this process.
        logging: the run's metric sinks (default: metrics.jsonl only).
        run_name: the name W&B / trackio show for this run (default: out_dir's name).
    Returns:
        LoopResult with the last logged loss, the step count and tokens seen.
    """
    total = sum(p.steps for p in phases)
    sharded = trainer is not None and trainer.backend == "fsdp2"
    ranks = shard_for_training(model, trainer, optim) if sharded else None  # type: ignore[arg-type]
    opt = build_optimizer(model, optim)  # after sharding: moments only for this rank's shards
    state = TrainerState(out_dir, model, opt)
    start = state.step
    main = ranks is None or ranks.main
    log = MetricSink(
        logging or LoggingCfg(),
        out_dir,
        name=run_name,
        config={"optim": optim.model_dump(mode="json"), "precision": precision},
        resume_step=state.metrics_resume_step,
        enabled=main,
    )
    load = ExpertLoad(model, train_only=True) if routers(model) else None
    balancer = _balancer(model, load, optim, ranks is not None)
    moe_stats: dict[str, float] = {}
    phase_idx, _ = _locate(phases, start)
    if phases[phase_idx].on_enter:
        phases[phase_idx].on_enter(model)
    model.train()
    device = model_device(model)  # batches are built on the CPU and moved there per step
    t0, tokens, loss_ema, history = time.time(), 0, float("nan"), []
    if heldout_fn and start == 0:
        log.log(0, {"heldout_loss": heldout_fn(model)})
        model.train()
    with log, progress(total, desc, start=start) as bar:
        for step in range(start, total):
            pi, local = _locate(phases, step)
            if pi != phase_idx:
                phase_idx = pi
                if phases[pi].on_enter:
                    phases[pi].on_enter(model)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, optim)
            batch = phases[pi].batch_fn(local)
            if ranks:
                batch = shard_rows(batch, ranks.rank, ranks.world)
            batch = to_device(batch, device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss, n_tok = loss_fn(model, batch)
            if ranks:  # weighted so the averaged gradient is that of the global token mean
                loss, lv, n_tok = global_mean(loss, n_tok)
            else:
                lv = loss.item()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
            opt.step()
            if balancer is not None:
                moe_stats = balancer.step()
            elif load is not None:
                moe_stats = load.pop()
            tokens += n_tok
            loss_ema = lv if math.isnan(loss_ema) else 0.9 * loss_ema + 0.1 * lv
            done = step + 1
            if done % log_every == 0 or done == total:
                row = {
                    "step": done,
                    "loss": lv,
                    "lr": opt.param_groups[0]["lr"],
                    "grad_norm": grad_norm_value(gnorm),
                    "phase": phases[pi].name,
                    "tokens_per_s": tokens / max(1e-9, time.time() - t0),
                    **moe_stats,
                }
                log.log(done, row)
                history.append(row)
            if heldout_fn and (done % heldout_every == 0 or done == total):
                log.log(done, {"heldout_loss": heldout_fn(model), "phase": phases[pi].name})
                model.train()
            stop = state.checkpoint_if_due(done, total, checkpoint_every, stop_after)
            bar.update(done, loss=loss_ema)
            if stop:
                break
    if load is not None:
        load.close()
    model.eval()
    return LoopResult(
        steps=total,
        final_loss=loss_ema,
        tokens=tokens,
        seconds=time.time() - t0,
        resumed_from=start,
        history=history,
    )
