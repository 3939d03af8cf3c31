"""Group-relative advantages (GRPO) and the dynamic-sampling filter.

Rewards arrive flat, ordered group by group: N = num_groups * group_size, where a group is the
G samples drawn for one prompt. Advantages are per sample; the loss broadcasts them over tokens.
Pure torch, no state: the RL loop picks the options from its config.
"""

from __future__ import annotations

import torch

BASELINES = ("mean", "leave_one_out")


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (N,), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size != 0:
        raise ValueError(
            f"rewards has {rewards.numel()} entries, not a multiple of group_size={group_size}"
        )
    return rewards.view(-1, group_size)  # (num_groups, G)


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    baseline: str = "mean",
    std_normalize: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO advantages: each reward minus its group's baseline.

        mean:           A_i = r_i - (1/G) Σ_j r_j
        leave_one_out:  A_i = r_i - (1/(G-1)) Σ_{j≠i} r_j
        std_normalize:  A_i <- A_i / (std_unbiased(r_group) + eps)

    Args:
        rewards: (N,) rewards, ordered group by group.
        group_size: G, the number of samples per prompt.
        baseline: "mean" or "leave_one_out".
        std_normalize: divide by the group's unbiased standard deviation (torch.std) + eps.
        eps: keeps the division finite for groups whose rewards are all equal.

    Returns:
        (N,) float advantages in the same order as `rewards`.
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    r = _grouped(rewards.float(), group_size)  # (num_groups, G)
    if (baseline == "leave_one_out" or std_normalize) and group_size < 2:
        raise ValueError(f"baseline={baseline!r}/std_normalize need group_size >= 2")
    if baseline == "mean":
        b = r.mean(dim=1, keepdim=True)  # (num_groups, 1)
    else:
        b = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)  # (num_groups, G)
    adv = r - b  # (num_groups, G)
    if std_normalize:
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.reshape(-1)  # (N,)


def dynamic_sampling_mask(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N,) bool: False for every sample of a group whose rewards are all equal.

    Such a group has zero advantage everywhere and gives no learning signal (DAPO's dynamic
    sampling drops and refills it).
    """
    r = _grouped(rewards, group_size)  # (num_groups, G)
    varied = r.amax(dim=1) != r.amin(dim=1)  # (num_groups,)
    return varied.repeat_interleave(group_size)  # (N,)
