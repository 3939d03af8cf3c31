"""Policy losses on tiny tensors; every expected value is derived by hand in a comment."""

import math

import torch
from torch.testing import assert_close

from arcforge.rl.losses import (
    POLICY_LOSSES,
    double_sided_is_loss,
    grpo_icepop_loss,
    icepop_weights,
    kl_penalty,
    opd_advantages,
    token_logprobs,
)

E = math.exp


def test_token_logprobs():
    # logits [0, ln 3]: p = [1/4, 3/4] -> log p = [-1.386294, -0.287682]
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, math.log(3.0)]]], dtype=torch.bfloat16)
    lp = token_logprobs(logits, torch.tensor([[1, 0]]))
    assert lp.dtype == torch.float32
    assert_close(lp, torch.tensor([[math.log(0.75), math.log(0.25)]]), atol=1e-2, rtol=0)


def test_icepop_weights():
    # ρ = e^[0.1, -0.1, 0.8, -0.8] = [1.10517, 0.904837, 2.2255, 0.449329]; β = 2:
    # keep 1/2 <= ρ <= 2 -> [1.10517, 0.904837, 0 (popped), 0 (popped)]
    old = torch.tensor([[0.1, -0.1, 0.8, -0.8]])
    w = icepop_weights(old, torch.zeros(1, 4), beta=2.0)
    assert_close(w, torch.tensor([[E(0.1), E(-0.1), 0.0, 0.0]]))


def _grpo_inputs(adv):
    logp_old = torch.full((1, 4), -1.0)
    # r = e^[0.2, -0.2, 0.1, 0] = [1.221403, 0.818731, 1.105171, 1]
    logp = (logp_old + torch.tensor([[0.2, -0.2, 0.1, 0.0]])).requires_grad_()
    # ρ = e^(logp_old - logp_infer) = [1, 1, 1, e = 2.718 > β=2 -> popped]
    logp_infer = logp_old - torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    return logp, logp_old, logp_infer, torch.tensor([adv])


def test_grpo_icepop_positive_advantage():
    logp, old, infer, adv = _grpo_inputs(1.0)
    loss, stats = grpo_icepop_loss(logp, old, infer, adv, torch.ones(1, 4), 0.2, 0.2, beta=2.0)
    # obj = [min(1.2214, 1.2) = 1.2 (clipped), 0.818731, 1.105171, 0 (popped)]
    # loss = -(1.2 + 0.818731 + 1.105171) / 4 = -0.780976
    assert_close(loss, torch.tensor(-(1.2 + E(-0.2) + E(0.1)) / 4))
    loss.backward()
    # d(-obj/4)/dlogp = -r·A/4 where the unclipped branch is active; 0 when clipped or popped
    assert_close(logp.grad, torch.tensor([[0.0, -E(-0.2) / 4, -E(0.1) / 4, 0.0]]))
    assert stats["popped_frac"] == 0.25 and stats["clip_frac"] == 0.25
    # rho_mean = (1 + 1 + 1 + e) / 4 = 1.429570; ratio_mean = (1.2214 + 0.8187 + 1.1052 + 1) / 4
    assert math.isclose(stats["rho_mean"], (3 + math.e) / 4, rel_tol=1e-6)
    assert math.isclose(stats["ratio_mean"], (E(0.2) + E(-0.2) + E(0.1) + 1) / 4, rel_tol=1e-6)


def test_grpo_icepop_negative_advantage_and_mask():
    logp, old, infer, adv = _grpo_inputs(-1.0)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, stats = grpo_icepop_loss(logp, old, infer, adv, mask, 0.2, 0.2, beta=2.0)
    # A = -1: min(-1.2214, -1.2) = -1.2214 (unclipped, keeps its gradient); token 3 masked
    # loss = (1.221403 + 0.818731 + 1.105171) / 3 = 1.048435
    assert_close(loss, torch.tensor((E(0.2) + E(-0.2) + E(0.1)) / 3))
    loss.backward()
    assert_close(logp.grad, torch.tensor([[E(0.2), E(-0.2), E(0.1), 0.0]]) / 3)
    assert stats["clip_frac"] == 0.0 and stats["popped_frac"] == 0.0


def test_grpo_icepop_weight_is_rho_and_token_advantages():
    # r = 1, ρ = e^0.5 = 1.648721 inside [1/2, 2] -> obj = ρ·A = 1.648721·3 = 4.946164
    logp = torch.zeros(1, 1)
    loss, _ = grpo_icepop_loss(
        logp,
        logp,
        torch.full((1, 1), -0.5),
        torch.tensor([[3.0]]),
        torch.ones(1, 1),
        0.2,
        0.2,
        beta=2.0,
    )
    assert_close(loss, torch.tensor(-3 * E(0.5)))


def test_double_sided_is():
    logp_roll = torch.full((1, 5), -2.0)
    # r = e^[0.2, -0.3, 0.1, 0, 0.4] = [1.221403, 0.740818, 1.105171, 1, 1.491825]
    # range [1 - 0.2, 1 + 0.28] = [0.8, 1.28] -> tokens 1 (< 0.8) and 4 (> 1.28) masked out
    logp = (logp_roll + torch.tensor([[0.2, -0.3, 0.1, 0.0, 0.4]])).requires_grad_()
    loss, stats = double_sided_is_loss(
        logp, logp_roll, torch.tensor([2.0]), torch.ones(1, 5), eps_low=0.2, eps_high=0.28
    )
    # loss = -2·(1.221403 + 1.105171 + 1) / 5 = -1.330630
    assert_close(loss, torch.tensor(-2 * (E(0.2) + E(0.1) + 1) / 5))
    loss.backward()
    # d/dlogp(r·A) = r·A -> grad = -r·A/5 inside the range, exactly 0 outside
    assert_close(logp.grad, torch.tensor([[-2 * E(0.2) / 5, 0.0, -2 * E(0.1) / 5, -0.4, 0.0]]))
    assert math.isclose(stats["masked_frac"], 0.4, rel_tol=1e-6)
    r_mean = (E(0.2) + E(-0.3) + E(0.1) + 1 + E(0.4)) / 5
    assert math.isclose(stats["ratio_mean"], r_mean, rel_tol=1e-6)


def test_double_sided_is_negative_advantage_outside_range_has_no_gradient():
    # r = e^0.4 = 1.4918 > 1.28 with A < 0: PPO clipping would keep this gradient; DSIS does not
    logp = torch.tensor([[0.4]], requires_grad=True)
    loss, _ = double_sided_is_loss(
        logp, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), 0.2, 0.28
    )
    loss.backward()
    assert loss.item() == 0.0 and logp.grad.item() == 0.0


def test_opd_advantages():
    # [-0.5 - (-1.0), -2.0 - (-1.0)] = [0.5, -1.0]
    student = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    adv = opd_advantages(torch.tensor([[-0.5, -2.0]]), student)
    assert_close(adv, torch.tensor([[0.5, -1.0]]))
    assert not adv.requires_grad


def test_kl_penalty():
    logp, ref, mask = torch.tensor([[0.1, -0.2, 5.0]]), torch.zeros(1, 3), torch.tensor([[1, 1, 0]])
    # d = [0.1, -0.2] (third token masked)
    assert_close(kl_penalty(logp, ref, mask, "k1"), torch.tensor(-0.05))  # (0.1 - 0.2)/2
    assert_close(kl_penalty(logp, ref, mask, "k2"), torch.tensor(0.0125))  # ½(0.01 + 0.04)/2
    # k3 = e^-d + d - 1: [0.904837 + 0.1 - 1, 1.221403 - 0.2 - 1] = [0.004837, 0.021403]
    assert_close(kl_penalty(logp, ref, mask), torch.tensor((E(-0.1) - 0.9 + E(0.2) - 1.2) / 2))


def test_policy_losses_registry():
    assert POLICY_LOSSES == {
        "grpo_icepop": grpo_icepop_loss,
        "double_sided_is": double_sided_is_loss,
    }
