"""Fit an MTP head to its target model's own greedy text, the text it will be asked to draft
in speculative decoding (spec_decode.py): the LocalEngine decodes it, `align_mtp`
(arcforge.model.mtp) self-distils the head on it.
"""

from __future__ import annotations

import torch
from torch import nn

from arcforge.model.mtp import MTPHead, align_mtp
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine


def align_on_own_text(
    model: nn.Module,
    mtp: MTPHead,
    prefixes: list[list[int]],
    length: int,
    pad_id: int,
    steps: int,
    lr: float = 1e-3,
    seed: int = 0,
) -> list[float]:
    """Self-distil `mtp` (`align_mtp`) on `model`'s greedy continuations of `prefixes`, each
    decoded to `length` tokens in all (cut to the shortest when one stops early): the text the
    head will be asked to draft. Returns the per-step KL.

    Raises:
        ValueError: the continuations are too short to train on (under 3 tokens).
    """
    new = max(1, length - min(map(len, prefixes)))
    outs = LocalEngine(model, pad_token_id=pad_id).generate(
        prefixes, SamplingParams(new, temperature=0.0)
    )
    seqs = [prefix + out.token_ids for prefix, out in zip(prefixes, outs)]
    width = min(length, *map(len, seqs))
    if width < 3:
        raise ValueError(f"greedy continuations of {width} tokens are too short to align on")
    data = torch.tensor([seq[:width] for seq in seqs])  # (N, width)
    return align_mtp(model, mtp, data, steps, lr=lr, seed=seed)
