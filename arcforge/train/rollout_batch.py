"""Rollouts as `Trajectory` records, and trajectories as padded training tensors.

The RL and distillation loops speak `arcforge.types.Trajectory` (token-in-token-out, docs/design.md): a prompt
segment (template, untrained) followed by the model segment exactly as the engine sampled it,
with the engine's logprobs and the policy version. `pad_trajectories` turns a list of them into
one right-padded `TokenBatch` for teacher-forced forwards: position t predicts token t+1, so the
logprob, mask and advantage columns are aligned with `targets`.

`sequence_logprobs` is the one trainer-side forward: the (B, T) logprobs of `targets` under a
model, in fp32, micro-batched. Right padding needs no attention mask in a causal model (padding
only ever follows the tokens that matter).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from arcforge.device import model_device
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import Completion
from arcforge.types import Segment, Trajectory


def trajectory_from_completion(
    prompt_ids: list[int],
    completion: Completion,
    version: int,
    task_id: str = "",
    group_id: str = "",
) -> Trajectory:
    """One single-turn rollout: prompt (untrained) + sampled tokens (trained)."""
    n = len(completion.token_ids)
    return Trajectory(
        segments=[
            Segment(list(prompt_ids), "template", [0] * len(prompt_ids)),
            Segment(
                list(completion.token_ids), "model", [1] * n, list(completion.logprobs), version
            ),
        ],
        task_id=task_id,
        group_id=group_id,
        finish_reason=completion.finish_reason,
    )


def model_tokens(traj: Trajectory) -> list[int]:
    """The sampled (model-segment) tokens of a trajectory, in order."""
    return [t for s in traj.segments if s.source == "model" for t in s.token_ids]


@dataclass
class TokenBatch:
    """Right-padded teacher-forcing tensors for B trajectories.

    input_ids:  (B, T) tokens 0..L-2 of each trajectory, then padding
    targets:    (B, T) tokens 1..L-1 (the token each position predicts), then padding
    mask:       (B, T) float, 1 where the target is a trained (model) token (a per-trajectory
                weight once `sequence_weighted`)
    logp_infer: (B, T) the engine's logprob of each target (0 where untrained)
    advantages: (B,) per sequence or (B, T) per token; zeros until the loop sets them
    logp_old:   (B, T) the trainer's logprobs before the update (set by the loop, no grad)
    logp_ref:   (B, T) a frozen reference model's or a teacher's logprobs (optional)
    temperature: (B,) the temperature each row was sampled and is scored at, with tempered
                logprobs and per-pool temperatures (optional; None: the caller's one value)
    """

    input_ids: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    logp_infer: torch.Tensor
    advantages: torch.Tensor
    logp_old: torch.Tensor | None = None
    logp_ref: torch.Tensor | None = None
    temperature: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, sl: slice | torch.Tensor, trim: bool = True) -> TokenBatch:
        """A micro-batch: rows `sl` (a slice or an index tensor), columns cut to its last trained
        column when `trim`."""
        mask = self.mask[sl]  # (b, T)
        cols = torch.nonzero(mask.sum(0)).max().item() + 1 if mask.any() else 1
        cols = cols if trim else mask.shape[1]

        def cut(x: torch.Tensor | None) -> torch.Tensor | None:
            if x is None:
                return None
            return x[sl, :cols] if x.dim() == 2 else x[sl]

        return TokenBatch(*(cut(getattr(self, f.name)) for f in fields(self)))

    def signal_rows(self) -> torch.Tensor:
        """Indices of the rows with a policy gradient: a trained token and a nonzero advantage
        (a row of a group whose episodes all got one reward has none)."""
        adv = self.advantages if self.advantages.dim() == 1 else self.advantages.abs().amax(1)
        return torch.nonzero((adv != 0) & (self.mask.sum(dim=1) > 0)).flatten()

    @property
    def n_tokens(self) -> int:
        """Trained tokens (the mask may hold weights, see `sequence_weighted`)."""
        return int((self.mask > 0).sum().item())


def sequence_weighted(mask: torch.Tensor) -> torch.Tensor:
    """(B, T) loss weights under which every trajectory counts the same: each row's trained
    tokens are scaled to sum to the batch's mean trained length, so the weights still sum to
    the trained-token count and a token-mean loss over them is a mean over sequences of
    per-sequence token means. Rows with no trained token stay zero."""
    lens = mask.sum(dim=1, keepdim=True)  # (B, 1)
    has = lens > 0
    if not has.any():
        return mask
    mean_len = lens[has].mean()
    return torch.where(has, mask * (mean_len / lens.clamp(min=1e-9)), mask)  # (B, T)


def pad_trajectories(trajs: list[Trajectory], pad_id: int) -> TokenBatch:
    """Stack trajectories into one right-padded TokenBatch (see the class docstring)."""
    if not trajs:
        raise ValueError("pad_trajectories needs at least one trajectory")
    T = max(len(t.token_ids) for t in trajs) - 1
    B = len(trajs)
    ids = torch.full((B, T + 1), pad_id, dtype=torch.long)  # (B, T+1)
    mask = torch.zeros(B, T + 1)  # (B, T+1) per token of the sequence
    lps = torch.zeros(B, T + 1)
    for b, t in enumerate(trajs):
        L = len(t.token_ids)
        ids[b, :L] = torch.tensor(t.token_ids)
        mask[b, :L] = torch.tensor(t.loss_mask, dtype=torch.float)
        lps[b, :L] = torch.tensor(t.logprobs)
    return TokenBatch(
        input_ids=ids[:, :-1],
        targets=ids[:, 1:],
        mask=mask[:, 1:],
        logp_infer=lps[:, 1:],
        advantages=torch.zeros(B),
    )


def sequence_logprobs(
    model: torch.nn.Module,
    batch: TokenBatch,
    micro_batch: int = 0,
    temperature: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """(B, T) fp32 logprobs of `batch.targets` under `model` (grad follows the caller's mode).

    Args:
        micro_batch: rows per forward (0: all at once).
        temperature: the logits are divided by it first (1: the raw policy); a (B,) tensor
            gives each row its own.
    """
    step = micro_batch or len(batch)
    dev = model_device(model)
    per_row = isinstance(temperature, torch.Tensor)
    if per_row and temperature.shape != (len(batch),):
        raise ValueError(
            f"per-row temperature needs shape ({len(batch)},), got {tuple(temperature.shape)}"
        )
    out = []
    for i in range(0, len(batch), step):
        x = batch.input_ids[i : i + step].to(dev)
        logits = model(input_ids=x).logits  # (b, T, V)
        if per_row:
            logits = logits / temperature[i : i + step].to(dev, logits.dtype)[:, None, None]
        elif temperature != 1.0:
            logits = logits / temperature
        out.append(token_logprobs(logits, batch.targets[i : i + step].to(dev)))  # (b, T)
    return torch.cat(out).to(batch.input_ids.device)  # (B, T) where the batch lives
