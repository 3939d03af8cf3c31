"""Pretraining and mid-training: packed next-token prediction through `train_loop`.

A batch is a (B, T+1) block of packed token ids; inputs are the first T columns, targets the
last T. Mid-training's staged context schedule becomes one loop phase per context stage, each
with its own packed data at that stage's length and an `on_enter` hook that sets the RoPE base
(re-applied on resume, so a resumed run trains with the same RoPE as an uninterrupted one).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from arcforge.config import OptimCfg
from arcforge.device import model_device
from arcforge.train.loop import LoopResult, Phase, train_loop

HELDOUT_SEQ_LEN = 128  # held-out losses use one length so stages are comparable


def lm_loss(model: torch.nn.Module, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Mean next-token cross-entropy over a packed (B, T+1) batch."""
    batch = batch.to(model_device(model))  # held-out blocks live on the CPU
    x, y = batch[:, :-1], batch[:, 1:]  # (B, T), (B, T)
    logits = model(input_ids=x).logits  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
    return loss, y.numel()


@torch.inference_mode()
def heldout_loss(model: torch.nn.Module, blocks: torch.Tensor, batch_size: int = 16) -> float:
    """Mean next-token loss over fixed held-out (N, T+1) blocks."""
    model.eval()
    total, n = 0.0, 0
    for i in range(0, blocks.size(0), batch_size):
        b = blocks[i : i + batch_size]
        loss, k = lm_loss(model, b)
        total += loss.item() * k
        n += k
    return total / max(1, n)


def train_lm(
    model: torch.nn.Module,
    phases: list[Phase],
    optim: OptimCfg,
    out_dir: Path,
    heldout: Callable[[torch.nn.Module], float] | None = None,
    **loop_kw,
) -> LoopResult:
    """Run the LM objective over `phases` (see arcforge.train.loop.train_loop for loop_kw)."""
    return train_loop(model, phases, lm_loss, optim, out_dir, heldout_fn=heldout, **loop_kw)
