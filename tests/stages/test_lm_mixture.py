"""Mid-training mixtures: a batch's rows come from every source in proportion to its weight and
add up to the batch exactly."""

import pytest

from arcforge.errors import UserError
from arcforge.stages.lm import mixed_rows


@pytest.mark.parametrize(
    "weights, n_rows",
    [([0.4, 0.3, 0.3], 8), ([1, 1, 1], 10), ([0.5, 0.2, 0.3], 1), ([5, 1], 7)],
)
def test_quotas_fill_the_batch_exactly(weights, n_rows):
    streams = [[100 * (i + 1) + t % 50 for t in range(3000)] for i in range(len(weights))]
    rows = mixed_rows(streams, weights, 64, n_rows, seed=0)
    assert rows.shape == (max(n_rows, len(weights)), 65)
    owners = [int(r[0]) // 100 - 1 for r in rows]
    assert set(owners) == set(range(len(weights)))  # every source has a row
    heaviest = max(range(len(weights)), key=lambda i: weights[i])
    assert owners.count(heaviest) == max(owners.count(i) for i in set(owners))


def test_a_source_too_short_for_one_row_is_named():
    with pytest.raises(UserError, match="source #1"):
        mixed_rows([list(range(500)), list(range(10))], [1, 1], 64, 4, seed=0)
