"""Outcome reward model (ORM): a causal LM with a scalar head, scoring (prompt, reply) pairs.

The ORM reads the conversation rendered with our chat template (user prompt + assistant reply)
and maps the final hidden state of its last token to one number through a Linear head: with
causal attention that token has seen the whole exchange. It is trained on preference pairs with
the Bradley–Terry loss (`arcforge.train.reward_model`), so only differences of its raw scores
mean anything; `normalize` maps a raw score to (0, 1) with σ((r − center) / scale), where center
and scale are the mean and std of the scores it gave its own training replies, so it can be
mixed with rule and judge scores.

A saved ORM is a directory:
    backbone/           the causal LM + tokenizer (a normal arcforge checkpoint)
    head.safetensors    the Linear head (weight (1, H), bias (1,))
    reward_model.json   format tag, center, scale, max_len and training summary
Deliberate simplification: padding is on the right and the score is read at the last real
token, which needs no attention-mask support beyond what every causal LM has.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from arcforge.chat import render_ids
from arcforge.device import model_device
from arcforge.errors import UserError
from arcforge.types import Message

FORMAT = "arcforge-orm-v1"


def encode_pair(tokenizer: Any, prompt: str, reply: str, max_len: int) -> list[int]:
    """Token ids of the user prompt + assistant reply; the last `max_len` when longer."""
    msgs = [Message("user", prompt), Message("assistant", reply)]
    ids = render_ids(msgs, tokenizer).input_ids
    return ids[-max_len:]


class RewardModel(nn.Module):
    """Causal LM backbone + Linear(hidden, 1) on the last real token's final hidden state.

    Args:
        lm: a transformers causal LM (its `base_model` gives the hidden states).
        tokenizer: the chat tokenizer.
        max_len: tokens kept per (prompt, reply) (the end is kept).
        seed: seeds the head's initial weights through its own generator, so the same seed
            gives the same head whatever the process drew from the global RNG before.
    """

    def __init__(self, lm: nn.Module, tokenizer: Any, max_len: int = 512, seed: int = 0) -> None:
        super().__init__()
        self.lm, self.tokenizer, self.max_len = lm, tokenizer, max_len
        H = lm.config.hidden_size
        g = torch.Generator().manual_seed(seed)
        weight = torch.randn(1, H, generator=g) / math.sqrt(H)  # (1, H), N(0, 1/H), on the CPU
        # built on "meta" and filled here: the global RNG is neither read nor advanced
        self.head = nn.Linear(H, 1, device="meta").to_empty(device=model_device(lm))
        with torch.no_grad():
            self.head.weight.copy_(weight)
            self.head.bias.zero_()
        self.center, self.scale = 0.0, 1.0
        self.meta: dict[str, Any] = {}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) right-padded ids and mask -> (B,) raw rewards."""
        hidden = self.lm.base_model(input_ids=input_ids, attention_mask=attention_mask)
        h = hidden.last_hidden_state  # (B, T, H)
        last = attention_mask.sum(1) - 1  # (B,) index of the last real token
        return self.head(h[torch.arange(h.shape[0]), last].float()).squeeze(-1)  # (B,)

    def batch(self, prompts: list[str], replies: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded (ids, mask) tensors, both (B, T)."""
        seqs = [encode_pair(self.tokenizer, p, r, self.max_len) for p, r in zip(prompts, replies)]
        T = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(seqs), T), pad, dtype=torch.long)
        mask = torch.zeros(len(seqs), T, dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
        dev = model_device(self.lm)
        return ids.to(dev), mask.to(dev)

    @torch.no_grad()
    def score(self, prompts: list[str], replies: list[str], batch_size: int = 32) -> list[float]:
        """Raw rewards of each (prompt, reply), in eval mode."""
        was = self.training
        self.eval()
        out: list[float] = []
        for i in range(0, len(prompts), batch_size):
            ids, mask = self.batch(prompts[i : i + batch_size], replies[i : i + batch_size])
            out += self(ids, mask).tolist()
        self.train(was)
        return out

    def normalize(self, raw: float) -> float:
        """σ((raw − center) / scale): a raw score mapped into (0, 1)."""
        return 1.0 / (1.0 + math.exp(-(raw - self.center) / max(self.scale, 1e-6)))

    def save(self, out_dir: str | Path, extra: dict[str, Any] | None = None) -> Path:
        from arcforge.model.checkpoint import save_checkpoint

        out = Path(out_dir)
        save_checkpoint(self.lm, self.tokenizer, out / "backbone", extra={"role": "orm"})
        save_file(
            {k: v.detach().contiguous() for k, v in self.head.state_dict().items()},
            str(out / "head.safetensors"),
        )
        meta = {
            "format": FORMAT,
            "center": self.center,
            "scale": self.scale,
            "max_len": self.max_len,
            **self.meta,
            **(extra or {}),
        }
        (out / "reward_model.json").write_text(json.dumps(meta, indent=1) + "\n")
        return out

    @classmethod
    def load(cls, path: str | Path) -> RewardModel:
        """Load a directory written by `save`; UserError naming what is missing."""
        from arcforge.model.checkpoint import load_model
        from arcforge.model.tokenizer import load_tokenizer

        p = Path(path)
        meta_file = p / "reward_model.json"
        if not meta_file.is_file() or not (p / "head.safetensors").is_file():
            raise UserError(
                f"{p} is not a reward model directory (needs reward_model.json, "
                "head.safetensors and backbone/; write one with `arcforge train-rm`)"
            )
        meta = json.loads(meta_file.read_text())
        if meta.get("format") != FORMAT:
            raise UserError(f"{meta_file}: format {meta.get('format')!r}, expected {FORMAT!r}")
        tok, _ = load_tokenizer(p / "backbone")
        rm = cls(load_model(p / "backbone"), tok, int(meta["max_len"]))
        rm.head.load_state_dict(load_file(str(p / "head.safetensors")))
        rm.center, rm.scale = float(meta["center"]), float(meta["scale"])
        rm.meta = {k: v for k, v in meta.items() if k not in ("format", "center", "scale")}
        return rm.eval()
