"""Packing documents into fixed-length next-token-prediction rows, and deterministic batching.

Documents are tokenized, each followed by EOS, and concatenated into one stream. Row i is the
window stream[i*T : i*T + T + 1] (T = seq_len): inputs row[:-1], targets row[1:]. Consecutive
rows overlap by one token, so every token after the first is a target exactly once and nothing
is padded; the tail that does not fill a row is dropped. Documents run across row boundaries
(attention is not reset at EOS: the usual simplification of packed pretraining).

`PackedDataset.batch(step, batch_size, seed)` is a pure function of its arguments: epoch
e = step // batches_per_epoch uses its own seeded permutation of the rows, so a resumed run asks
for step k and gets exactly the batch an uninterrupted run saw at step k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

HELDOUT_SEQ_LEN = 128  # held-out losses use one length so stages are comparable


def tokenize_docs(texts: Sequence[str], tokenizer: Any, eos_id: int | None = None) -> list[int]:
    """One token stream: each document's ids followed by EOS.

    Args:
        texts: the documents.
        tokenizer: an HF tokenizer (called on the batch, no special tokens added).
        eos_id: the separator; defaults to `tokenizer.eos_token_id`.
    """
    eos = tokenizer.eos_token_id if eos_id is None else eos_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token_id; pass eos_id")
    stream: list[int] = []
    for i in range(0, len(texts), 256):
        chunk = list(texts[i : i + 256])
        for ids in tokenizer(chunk, add_special_tokens=False)["input_ids"]:
            stream.extend(ids)
            stream.append(eos)
    return stream


def pack(stream: Sequence[int], seq_len: int) -> torch.Tensor:
    """Cut a token stream into rows of seq_len + 1 tokens overlapping by one.

    Returns:
        (N, seq_len + 1) int64 with N = (len(stream) - 1) // seq_len.
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    n = max((len(stream) - 1) // seq_len, 0)
    if n == 0:
        return torch.empty(0, seq_len + 1, dtype=torch.long)
    flat = torch.tensor(stream[: n * seq_len + 1], dtype=torch.long)  # (N*T + 1,)
    return flat.unfold(0, seq_len + 1, seq_len).contiguous()  # (N, T + 1)


@dataclass
class PackedDataset:
    """Packed rows plus deterministic batching.

    data: (N, seq_len + 1) int64 token ids.
    """

    data: torch.Tensor
    _perm_cache: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.data.dim() != 2 or self.data.shape[1] < 2:
            raise ValueError(f"data must be (N, seq_len + 1), got {tuple(self.data.shape)}")

    @classmethod
    def from_texts(
        cls, texts: Sequence[str], tokenizer: Any, seq_len: int, eos_id: int | None = None
    ) -> PackedDataset:
        return cls(pack(tokenize_docs(texts, tokenizer, eos_id), seq_len))

    @property
    def seq_len(self) -> int:
        return self.data.shape[1] - 1

    @property
    def n_tokens(self) -> int:
        """Target tokens in one epoch: N * seq_len."""
        return self.data.shape[0] * self.seq_len

    def __len__(self) -> int:
        return self.data.shape[0]

    def batches_per_epoch(self, batch_size: int) -> int:
        """Full batches per epoch (the last partial batch of an epoch is dropped)."""
        n = len(self) // batch_size
        if n == 0:
            raise ValueError(f"{len(self)} packed rows cannot fill a batch of {batch_size}")
        return n

    def _perm(self, epoch: int, seed: int) -> torch.Tensor:
        key = (epoch, seed)
        if key not in self._perm_cache:
            g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
            self._perm_cache = {key: torch.randperm(len(self), generator=g)}  # keep one epoch
        return self._perm_cache[key]

    def batch(self, step: int, batch_size: int, seed: int) -> torch.Tensor:
        """The batch of global step `step` (0-based).

        Returns:
            (batch_size, seq_len + 1) int64; inputs are [:, :-1], targets [:, 1:].
        """
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        per_epoch = self.batches_per_epoch(batch_size)
        epoch, k = divmod(step, per_epoch)
        rows = self._perm(epoch, seed)[k * batch_size : (k + 1) * batch_size]  # (B,)
        return self.data[rows]  # (B, T + 1)

    def save(self, path: str | Path) -> None:
        torch.save(self.data, str(path))

    @classmethod
    def load(cls, path: str | Path) -> PackedDataset:
        return cls(torch.load(str(path), weights_only=True))
