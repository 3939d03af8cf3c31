"""What the synchronous on-policy trainers (`train_rl`, `train_distill`) share around their own
rollouts and losses: opening a run (optimizer, resumable state, metric sink, the engine back on
the resumed weights) and one optimizer step at the schedule's learning rate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

import torch
from torch.optim import Optimizer

from arcforge.config import OptimCfg
from arcforge.metrics import LoggingCfg, MetricSink
from arcforge.rollout.engines.base import Engine
from arcforge.train.lora import policy_state_dict
from arcforge.train.optim import build_optimizer, lr_at
from arcforge.train.resume import TrainerState


class StepSettings(Protocol):
    """What `optimizer_step` reads of a trainer's config."""

    steps: int
    optim: OptimCfg


class PolicyRun(NamedTuple):
    """An on-policy trainer's optimizer, resumable state and metric sink."""

    opt: Optimizer
    state: TrainerState
    sink: MetricSink


def open_policy_run(
    model: torch.nn.Module,
    engine: Engine,
    optim: OptimCfg,
    out_dir: Path,
    logging: LoggingCfg | None,
    run_name: str | None,
) -> PolicyRun:
    """The optimizer of `model`, its state under `out_dir` (loaded when one was saved: the
    engine then gets the resumed weights, at the version the state recorded) and the metric
    sink (metrics.jsonl and `logging`'s sinks, continuing after the resumed step)."""
    opt = build_optimizer(model, optim)
    state = TrainerState(out_dir, model, opt)
    if state.resumed:
        engine.load_weights(policy_state_dict(model), state.info["engine_version"])
    sink = MetricSink(
        logging or LoggingCfg(), out_dir, name=run_name, resume_step=state.metrics_resume_step
    )
    return PolicyRun(opt, state, sink)


def optimizer_step(
    model: torch.nn.Module,
    opt: Optimizer,
    cfg: StepSettings,
    step: int,
    backward: Callable[[], dict[str, float]],
) -> dict[str, float]:
    """One optimizer step at step `step`'s learning rate: clear the gradients, run `backward`
    (which accumulates them and returns its loss stats), clip the gradient norm to
    `cfg.optim.grad_clip`, step. Returns the loss stats with `grad_norm` (before clipping)."""
    for group in opt.param_groups:
        group["lr"] = lr_at(step, cfg.steps, cfg.optim)
    opt.zero_grad(set_to_none=True)
    stats = backward()
    stats["grad_norm"] = float(
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
    )
    opt.step()
    return stats
