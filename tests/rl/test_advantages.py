"""group_advantages and dynamic_sampling_mask on hand-computed groups."""

import pytest
import torch
from torch.testing import assert_close

from arcforge.rl.advantages import dynamic_sampling_mask, group_advantages

# two groups of G=4: one mixed, one all-correct
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])


def test_mean_baseline():
    # group 1 mean 0.5 -> ±0.5; group 2 mean 1 -> 0
    adv = group_advantages(REWARDS, 4)
    assert_close(adv, torch.tensor([0.5, -0.5, -0.5, 0.5, 0.0, 0.0, 0.0, 0.0]))


def test_leave_one_out_baseline():
    # [1, 0, 0, 0]: A_0 = 1 - (0+0+0)/3 = 1; A_j = 0 - (1+0+0)/3 = -1/3
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, baseline="leave_one_out")
    assert_close(adv, torch.tensor([1.0, -1 / 3, -1 / 3, -1 / 3]))


def test_std_normalize_mean():
    # [1,0,0,1]: unbiased std = sqrt(4 * 0.25 / 3) = 0.57735 -> 0.5 / 0.57735 = 0.866025
    # [1,1,1,1]: 0 / (0 + eps) = 0
    adv = group_advantages(REWARDS, 4, std_normalize=True)
    a = 0.5 / (3**-0.5 + 1e-6)
    assert_close(adv, torch.tensor([a, -a, -a, a, 0.0, 0.0, 0.0, 0.0]))


def test_std_normalize_leave_one_out():
    # [1,0,0,0]: mean 0.25, std = sqrt((0.75² + 3·0.25²)/3) = sqrt(0.25) = 0.5
    # -> [1/0.5, (-1/3)/0.5] = [2, -2/3]
    adv = group_advantages(
        torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, baseline="leave_one_out", std_normalize=True
    )
    assert_close(adv, torch.tensor([2.0, -2 / 3, -2 / 3, -2 / 3]), atol=1e-5, rtol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="multiple of group_size"):
        group_advantages(torch.ones(6), 4)
    with pytest.raises(ValueError, match="baseline"):
        group_advantages(torch.ones(4), 4, baseline="median")
    with pytest.raises(ValueError, match="group_size >= 2"):
        group_advantages(torch.ones(4), 1, baseline="leave_one_out")


def test_dynamic_sampling_mask():
    mask = dynamic_sampling_mask(REWARDS, 4)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [True] * 4 + [False] * 4
