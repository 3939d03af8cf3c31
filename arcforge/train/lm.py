"""Pretraining and mid-training: packed next-token prediction through `train_loop`.

A batch is a (B, T+1) block of packed token ids; inputs are the first T columns, targets the
last T. Mid-training's staged context schedule becomes one loop phase per context stage, each
with its own packed data at that stage's length and an `on_enter` hook that sets the RoPE base
(re-applied on resume, so a resumed run trains with the same RoPE as an uninterrupted one).

With an MTP head (arcforge.model.mtp) the loss is LM + lambda * MTP from one forward of the main
model. The head is attached to the model as the submodule `mtp` for the run, so the loop's
optimizer, gradient clipping and resumable state include it; it is detached again on return,
so the stage's `save_pretrained` checkpoint holds the main model only (`save_mtp` writes the
head beside it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from arcforge.config import OptimCfg
from arcforge.device import model_device
from arcforge.model.mtp import MTPHead, main_hidden, mtp_loss
from arcforge.train.loop import LoopResult, Phase, train_loop

MTP_ATTR = "mtp"  # the MTP head's submodule name on the model while it trains


def lm_loss(model: torch.nn.Module, batch: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Mean next-token cross-entropy over a packed (B, T+1) batch."""
    batch = batch.to(model_device(model))  # held-out blocks live on the CPU
    x, y = batch[:, :-1], batch[:, 1:]  # (B, T), (B, T)
    logits = model(input_ids=x).logits  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
    return loss, y.numel()


def lm_mtp_loss(
    model: torch.nn.Module, batch: torch.Tensor, mtp: MTPHead, weight: float
) -> tuple[torch.Tensor, int]:
    """`lm_loss` + weight * `mtp_loss` over a packed (B, T+1) batch, one main-model forward."""
    batch = batch.to(model_device(model))
    x, y = batch[:, :-1], batch[:, 1:]  # (B, T), (B, T)
    hidden = main_hidden(model, x)  # (B, T, d)
    logits = model.get_output_embeddings()(hidden)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
    return loss + weight * mtp_loss(model, mtp, batch, hidden), y.numel()


@torch.no_grad()  # not inference_mode: FSDP2 would keep inference all-gather buffers
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
    mtp: MTPHead | None = None,
    mtp_weight: float = 0.3,
    **loop_kw,
) -> LoopResult:
    """Run the LM objective over `phases` (see arcforge.train.loop.train_loop for loop_kw).

    With `mtp`, the head trains alongside (loss LM + mtp_weight * MTP; see the module doc).
    """
    if mtp is None:
        return train_loop(model, phases, lm_loss, optim, out_dir, heldout_fn=heldout, **loop_kw)
    model.add_module(MTP_ATTR, mtp.to(model_device(model)))
    try:
        return train_loop(
            model,
            phases,
            lambda m, b: lm_mtp_loss(m, b, mtp, mtp_weight),
            optim,
            out_dir,
            heldout_fn=heldout,
            **loop_kw,
        )
    finally:
        delattr(model, MTP_ATTR)
