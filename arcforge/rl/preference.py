"""Preference losses for reward models: the Bradley–Terry pairwise loss (pure math, torch only).

A reward model gives each (prompt, reply) a scalar r. Bradley–Terry models the probability that
the chosen reply beats the rejected one as σ(r_c − r_r); training maximizes its log-likelihood
over labelled pairs. An optional per-pair margin m (how much better the chosen reply is, as in
Llama 2's reward models) asks for r_c − r_r > m before the loss flattens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bradley_terry_loss(
    r_chosen: torch.Tensor,
    r_rejected: torch.Tensor,
    margin: torch.Tensor | float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """L = −mean log σ(r_c − r_r − m).

    Args:
        r_chosen: (P,) rewards of the preferred replies.
        r_rejected: (P,) rewards of the dispreferred replies of the same prompts.
        margin: scalar or (P,) required reward gap.
    Returns:
        (loss, stats): stats holds the pair accuracy (share with r_c > r_r) and the mean gap.
    """
    if r_chosen.shape != r_rejected.shape:
        raise ValueError(f"chosen {tuple(r_chosen.shape)} != rejected {tuple(r_rejected.shape)}")
    gap = r_chosen.float() - r_rejected.float()  # (P,)
    loss = -F.logsigmoid(gap - margin).mean()  # log σ computed stably (no log(0))
    with torch.no_grad():
        stats = {"accuracy": (gap > 0).float().mean().item(), "gap": gap.mean().item()}
    return loss, stats
