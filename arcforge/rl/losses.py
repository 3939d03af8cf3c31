"""Policy losses for RL on LLMs: GRPO with IcePop, direct double-sided importance sampling, and
the on-policy distillation advantage (docs/design.md).

Every loss is a pure function of token tensors, `(B, T)` unless said otherwise, returning
`(loss, stats)`; `stats` holds detached Python floats for logging. Token averages are over the
whole micro-batch (`Σ(obj·mask) / Σmask`, token-level as in DAPO/GLM-5), not per sequence.

Three logprobs of the same sampled tokens appear here:
    logp         current trainer policy (with grad)
    logp_old     trainer policy that was current when the batch was sampled (no grad)
    logp_infer   inference engine's logprob (another precision/kernel: the train/infer mismatch)
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] in fp32.

    Args:
        logits: (B, T, V), any float dtype.
        targets: (B, T) token ids.
    Returns:
        (B, T) float32 logprobs.
    """
    logits = logits.float()  # (B, T, V)
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return picked - torch.logsumexp(logits, dim=-1)  # (B, T)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _token_advantages(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if advantages.dim() == 1:
        return advantages[:, None].expand_as(like)  # (B,) -> (B, T)
    return advantages  # (B, T)


def icepop_weights(
    logp_train_old: torch.Tensor, logp_infer: torch.Tensor, beta: float
) -> torch.Tensor:
    """IcePop token weights: pop(ρ) = ρ if 1/β <= ρ <= β else 0, ρ = exp(logp_train_old − logp_infer).

    ρ is the train/inference probability ratio of the sampled token; tokens where the two
    engines disagree by more than a factor β are dropped from the gradient. Detached.

    Returns:
        (B, T) weights.
    """
    with torch.no_grad():
        rho = torch.exp(logp_train_old.float() - logp_infer.float())  # (B, T)
        keep = (rho >= 1.0 / beta) & (rho <= beta)
        return torch.where(keep, rho, torch.zeros_like(rho))


def grpo_icepop_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    logp_infer: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    beta: float | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO clipped surrogate with IcePop masking of the train/infer mismatch.

        r_t   = exp(logp_t − logp_old_t)
        ρ_t   = sg[exp(logp_old_t − logp_infer_t)]
        obj_t = pop(ρ_t; 1/β, β) · min(r_t A_t, clip(r_t, 1 − clip_low, 1 + clip_high) A_t)
        loss  = −Σ_t obj_t m_t / Σ_t m_t

    Args:
        logp, logp_old, logp_infer: (B, T) logprobs of the sampled tokens.
        advantages: (B,) per sequence (broadcast over tokens) or (B, T).
        mask: (B, T) 1 for trained (model) tokens, 0 for prompt / observation / padding.
        beta: IcePop's band; None: no IcePop (ρ := 1, every token weighs 1, logp_infer unused).
    Returns:
        loss (scalar), stats with popped_frac, clip_frac, rho_mean, ratio_mean.
    """
    adv = _token_advantages(advantages, logp)  # (B, T)
    if beta is None:
        logp_infer = logp_old  # ρ = exp(0) = 1: inside any band, nothing popped
        beta = float("inf")
    w = icepop_weights(logp_old, logp_infer, beta)  # (B, T)
    ratio = torch.exp(logp - logp_old.detach())  # (B, T)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    obj = w * torch.minimum(unclipped, clipped)  # (B, T)
    loss = -_masked_mean(obj, mask)
    with torch.no_grad():
        rho = torch.exp(logp_old.float() - logp_infer.float())
        stats = {
            "popped_frac": _masked_mean((w == 0).float(), mask).item(),
            "clip_frac": _masked_mean((clipped < unclipped).float(), mask).item(),
            "rho_mean": _masked_mean(rho, mask).item(),
            "ratio_mean": _masked_mean(ratio, mask).item(),
        }
    return loss, stats


def double_sided_is_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Direct double-sided importance sampling against the rollout engine's logprobs.

        r_t   = exp(logp_t − logp_rollout_t)
        obj_t = 1[1 − eps_low <= r_t <= 1 + eps_high] · r_t · A_t     (indicator without grad)
        loss  = −Σ_t obj_t m_t / Σ_t m_t

    Unlike PPO clipping, tokens outside the trust region get no gradient on either side of A.

    Returns:
        loss (scalar), stats with masked_frac (tokens outside the range) and ratio_mean.
    """
    adv = _token_advantages(advantages, logp)  # (B, T)
    ratio = torch.exp(logp - logp_rollout.detach())  # (B, T)
    with torch.no_grad():
        inside = ((ratio >= 1.0 - eps_low) & (ratio <= 1.0 + eps_high)).to(ratio.dtype)
    obj = inside * ratio * adv  # (B, T)
    loss = -_masked_mean(obj, mask)
    stats = {
        "masked_frac": _masked_mean(1.0 - inside, mask).item(),
        "ratio_mean": _masked_mean(ratio.detach(), mask).item(),
    }
    return loss, stats


def opd_advantages(logp_teacher: torch.Tensor, logp_student: torch.Tensor) -> torch.Tensor:
    """On-policy distillation token advantage: A_t = sg[log π_teacher(y_t) − log π_student(y_t)].

    Returns:
        (B, T) detached advantages (positive where the teacher likes the student's token more).
    """
    return (logp_teacher - logp_student).detach()


def kl_penalty(
    logp: torch.Tensor, logp_ref: torch.Tensor, mask: torch.Tensor, kind: str = "k3"
) -> torch.Tensor:
    """Masked token-mean KL(π || π_ref) estimate from sampled tokens (Schulman's estimators).

        k1 = logp − logp_ref
        k2 = ½ (logp − logp_ref)²
        k3 = exp(logp_ref − logp) − (logp_ref − logp) − 1      (unbiased, always >= 0)

    Returns:
        scalar, differentiable through `logp` (`logp_ref` is treated as a constant).
    """
    d = logp - logp_ref.detach()  # (B, T)
    if kind == "k1":
        k = d
    elif kind == "k2":
        k = 0.5 * d.pow(2)
    elif kind == "k3":
        k = torch.exp(-d) + d - 1.0
    else:
        raise ValueError(f"kl kind must be 'k1', 'k2' or 'k3', got {kind!r}")
    return _masked_mean(k, mask)


# Loops pick a policy loss by name from the config; both take the rollout logprobs as the
# off-policy reference (for grpo_icepop, the loop also passes logp_old and beta).
POLICY_LOSSES: dict[str, Callable[..., tuple[torch.Tensor, dict[str, float]]]] = {
    "grpo_icepop": grpo_icepop_loss,
    "double_sided_is": double_sided_is_loss,
}
