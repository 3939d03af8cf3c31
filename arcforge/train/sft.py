"""Supervised fine-tuning on conversations with the chat template's loss mask.

Conversations are rendered by `arcforge.chat` into token ids and a loss mask (assistant tokens
only; `train=False` messages, tool outputs, system/user text and template headers masked; the
thinking mode decides which reasoning is in context). Examples longer than `max_len` are cut at
the end; the assistant turn the cut falls inside is left untrained (trained, it would teach a
reply that never reaches its stop token, the model then runs on to the token limit), and an
example left with no trained token is dropped and counted. Batches are a pure
function of the step (a seeded per-epoch permutation), so resume is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
import torch.nn.functional as F

from arcforge.chat import ThinkingConfig, render_ids, turn_prefixes
from arcforge.config import OptimCfg
from arcforge.train.loop import LoopResult, Phase, train_loop
from arcforge.types import Message, Tool


class SFTSettings(Protocol):
    """What `train_sft` reads of its config (the SFT stage's, arcforge.stages.sft)."""

    name: str
    seed: int
    epochs: float
    batch_size: int
    optim: OptimCfg
    precision: str  # fp32 or bf16 (autocast)
    log_every: int
    checkpoint_every: int


@dataclass
class Conversation:
    messages: list[Message]
    tools: list[Tool] = field(default_factory=list)
    preserve_thinking: bool | None = None  # None: the stage default


@dataclass
class SFTExample:
    input_ids: list[int]
    loss_mask: list[int]


def encode_conversations(
    convs: list[Conversation], tokenizer, max_len: int, preserve_default: bool = False
) -> tuple[list[SFTExample], dict]:
    """Render + tokenize; returns the examples and counts (kept, truncated, dropped)."""
    out = []
    counts = {"kept": 0, "truncated": 0, "cut_turns_untrained": 0, "dropped_no_target": 0}
    for c in convs:
        keep = preserve_default if c.preserve_thinking is None else c.preserve_thinking
        # Dropped thinking trains only the last turn of a render, so each turn is its own
        # example (its prefix conversation); preserved thinking trains every turn in one.
        prefixes = [c.messages] if keep else turn_prefixes(c.messages)
        for msgs in prefixes:
            enc = render_ids(
                msgs, tokenizer, tools=c.tools or None, thinking=ThinkingConfig(preserve=keep)
            )
            ids, mask = list(enc.input_ids), list(enc.loss_mask)
            if len(ids) > max_len + 1:
                cut_inside_turn = mask[max_len] == 1 and mask[max_len + 1] == 1
                ids, mask = ids[: max_len + 1], mask[: max_len + 1]
                counts["truncated"] += 1
                if cut_inside_turn:
                    counts["cut_turns_untrained"] += 1
                    i = len(mask)
                    while i > 0 and mask[i - 1] == 1:
                        i -= 1
                    mask[i:] = [0] * (len(mask) - i)
            if sum(mask[1:]) == 0:
                counts["dropped_no_target"] += 1
                continue
            out.append(SFTExample(ids, mask))
            counts["kept"] += 1
    return out, counts


def epoch_batches(lengths: list[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """One epoch's batches of example indices, grouped by length to cut padding.

    The epoch's permutation is cut into windows of 32 batches; each window is sorted by
    length and cut into batches, and the batch order is shuffled. Batches stay random while
    short reasoning demos no longer pad up to a long agent episode (2-4x fewer padded tokens
    on the demo's mix). A pure function of (seed, epoch): resume stays exact.
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(len(lengths), generator=g).tolist()
    n_full = len(perm) // batch_size * batch_size or len(perm)  # the ragged tail is left out
    window = batch_size * 32
    batches = []
    for w in range(0, n_full, window):
        chunk = sorted(perm[w : min(w + window, n_full)], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    order = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in order]


def make_batch_fn(examples: list[SFTExample], batch_size: int, seed: int, pad_id: int):
    """step -> (input_ids (B, T), targets (B, T) with -100 where not trained)."""
    lengths = [len(e.input_ids) for e in examples]
    cache: dict[int, list[list[int]]] = {}

    def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        per_epoch = max(1, len(examples) // batch_size)
        epoch = step // per_epoch
        if epoch not in cache:
            cache.clear()
            cache[epoch] = epoch_batches(lengths, batch_size, seed, epoch)
        rows = [examples[i] for i in cache[epoch][step % per_epoch]]
        T = max(len(r.input_ids) for r in rows) - 1
        x = torch.full((len(rows), T), pad_id, dtype=torch.long)  # (B, T)
        y = torch.full((len(rows), T), -100, dtype=torch.long)  # (B, T)
        for i, r in enumerate(rows):
            ids = torch.tensor(r.input_ids)
            m = torch.tensor(r.loss_mask[1:], dtype=torch.bool)
            x[i, : len(ids) - 1] = ids[:-1]
            y[i, : len(ids) - 1] = torch.where(m, ids[1:], torch.full_like(ids[1:], -100))
        return x, y

    return batch


def sft_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]):
    """Mean cross-entropy over trained tokens; padding is on the right so no mask is needed."""
    x, y = batch
    logits = model(input_ids=x).logits  # (B, T, V)
    n = int((y != -100).sum())
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1), ignore_index=-100
    )
    return loss, n


def train_sft(
    model: torch.nn.Module,
    examples: list[SFTExample],
    cfg: SFTSettings,
    out_dir: Path,
    pad_id: int,
    **loop_kw,
) -> LoopResult:
    steps = max(1, int(cfg.epochs * len(examples) / cfg.batch_size))
    phase = Phase(
        steps=steps, batch_fn=make_batch_fn(examples, cfg.batch_size, cfg.seed, pad_id), name="sft"
    )
    return train_loop(
        model,
        [phase],
        sft_loss,
        cfg.optim,
        out_dir,
        log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every,
        desc=f"sft {cfg.name}",
        precision=cfg.precision,
        **loop_kw,
    )
