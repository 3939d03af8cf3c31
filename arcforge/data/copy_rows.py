"""Synthetic copy rows: random token sequences in which one span is repeated later.

The only way to predict the repeat is to find the span's first occurrence and copy what
followed it (an induction head). Mixed into pretraining, they give the copying circuit planted
by `arcforge.model.prime` a reward on every batch; the world's text alone rewards it too rarely
to keep it (measured: without them the planted circuit decayed within ~40 steps, with 400
warm-up steps of copy rows and 25% of each later batch it reached 0.87 repeat accuracy and
34% first-token / 10% whole-name copying on `benchmarks/copy_probe.py`, from 6-13% / 0).

Rows are a pure function of (seed, step), so a resumed run sees the rows it would have seen.
"""

from __future__ import annotations

import torch


def copy_rows(n: int, seq_len: int, token_ids: torch.Tensor, seed: int) -> torch.Tensor:
    """(n, seq_len + 1) rows of ids drawn from `token_ids`, each with one span repeated.

    A span of length L (seq_len/8 <= L < seq_len/2, at least 2) starting at s is copied to a
    later start d >= s + L, so the repeat's tokens after its first are predictable by copying.
    """
    if seq_len < 8:
        raise ValueError(f"copy rows need seq_len >= 8, got {seq_len}")
    total = seq_len + 1
    g = torch.Generator().manual_seed(seed)
    rows = token_ids[torch.randint(0, len(token_ids), (n, total), generator=g)]
    lo, hi = max(2, total // 8), max(3, total // 2)
    for r in range(n):
        span = int(torch.randint(lo, hi, (1,), generator=g))
        s = int(torch.randint(0, total - 2 * span + 1, (1,), generator=g))
        d = int(torch.randint(s + span, total - span + 1, (1,), generator=g))
        rows[r, d : d + span] = rows[r, s : s + span]
    return rows


def plain_token_ids(tokenizer) -> torch.Tensor:
    """Every id of `tokenizer` except its special tokens (pad, bos, eos, chat markers)."""
    special = set(tokenizer.all_special_ids)
    return torch.tensor([i for i in range(len(tokenizer)) if i not in special])
