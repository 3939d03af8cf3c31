"""The Bradley–Terry loss on tiny tensors; expected values derived by hand in comments."""

import math

import pytest
import torch
from torch.testing import assert_close

from arcforge.rl.preference import bradley_terry_loss


def test_bt_loss_by_hand():
    # gaps r_c - r_r = [2 - 0, 0 - 1] = [2, -1]
    # -log σ(2) = log(1 + e^-2) = 0.126928; -log σ(-1) = log(1 + e^1) = 1.313262
    # mean = 0.720095; accuracy = 1/2; mean gap = 0.5
    rc = torch.tensor([2.0, 0.0], requires_grad=True)
    rr = torch.tensor([0.0, 1.0])
    loss, st = bradley_terry_loss(rc, rr)
    assert_close(loss, torch.tensor((math.log1p(math.exp(-2)) + math.log1p(math.e)) / 2))
    assert st == {"accuracy": 0.5, "gap": 0.5}
    loss.backward()
    # dL/dr_c[i] = -(1 - σ(gap_i)) / P: σ(2) = 0.880797 -> -0.059601; σ(-1) = 0.268941 -> -0.365529
    assert_close(
        rc.grad, torch.tensor([-(1 - 0.880797) / 2, -(1 - 0.268941) / 2]), atol=1e-6, rtol=0
    )


def test_bt_margin_shifts_the_gap():
    # gap 1, margin 1 -> -log σ(0) = log 2 = 0.693147
    loss, _ = bradley_terry_loss(torch.tensor([1.0]), torch.tensor([0.0]), margin=1.0)
    assert_close(loss, torch.tensor(math.log(2.0)))


def test_bt_is_stable_for_large_gaps():
    # gap -200: -log σ(-200) = 200 (naive log(sigmoid) would give inf)
    loss, st = bradley_terry_loss(torch.tensor([0.0]), torch.tensor([200.0]))
    assert_close(loss, torch.tensor(200.0))
    assert st["accuracy"] == 0.0


def test_bt_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="chosen"):
        bradley_terry_loss(torch.zeros(2), torch.zeros(3))
