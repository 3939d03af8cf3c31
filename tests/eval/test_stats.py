"""Confidence intervals, checked against hand-computed values."""

import pytest

from arcforge.stats import cluster_mean_ci, mean_ci, summarize, wilson_ci


def test_wilson_half():
    # p = 0.5, n = 100, z = 1.96: centre = 0.5 (symmetric)
    # half = 1.96 * sqrt(0.0025 + 0.0000960) / 1.038416 = 1.96 * 0.050951 / 1.038416 = 0.096170
    lo, hi = wilson_ci(50, 100)
    assert lo == pytest.approx(0.5 - 0.09617, abs=1e-4)
    assert hi == pytest.approx(0.5 + 0.09617, abs=1e-4)


def test_wilson_zero_is_not_degenerate():
    # 0/20: lo = 0, hi = (z^2/n) / (1 + z^2/n) = 0.19208 / 1.19208 = 0.16113
    lo, hi = wilson_ci(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.16113, abs=1e-4)


def test_mean_ci():
    # values 1, 2, 3: mean 2, sd 1, se 1/sqrt(3) = 0.57735, half = 1.96 * se = 1.13161
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and lo == pytest.approx(2 - 1.13161, abs=1e-4)


def test_summarize_picks_wilson_for_binary():
    r = summarize([1.0, 0.0, 1.0, 1.0])
    assert r["score"] == 0.75 and r["n"] == 4 and r["ci"] == list(wilson_ci(3, 4))
    r = summarize([0.5, 1.5])
    assert r["score"] == 1.0 and r["ci"][0] < 1.0 < r["ci"][1]


def test_summarize_clips_shares_to_unit_interval():
    # 0.5 and 299 zeros: mean 1/600 = 0.001667; sd = sqrt((0.25 - 300 * (1/600)^2) / 299)
    # = sqrt(0.249167 / 299) = 0.028868; half = 1.96 * 0.028868 / sqrt(300) = 0.003267, so the
    # raw interval starts at -0.0016: a share cannot be negative, the lower end is clipped to 0
    r = summarize([0.5] + [0.0] * 299)
    assert r["ci"][0] == 0.0 and r["ci"][1] == pytest.approx(1 / 600 + 0.003267, abs=1e-5)
    # losses are not shares: no clipping
    assert summarize([-1.0, 1.0])["ci"][0] < -1.0


def test_cluster_mean_ci_by_hand():
    # values 1, 1, 0, 0 in clusters a, a, b, b: mean 0.5, cluster residual sums +1 and -1,
    # se = sqrt(2 / 1 * (1 + 1)) / 4 = 0.5, t(1 df) = 12.706 -> half 6.353
    m, lo, hi = cluster_mean_ci([1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"])
    assert m == 0.5 and hi - m == pytest.approx(6.353, abs=1e-3)
    # one item per cluster: the ordinary se, t instead of z (values 1, 2, 3: se 0.57735 with
    # n / (n - 1) * sum r^2 = 1.5 * 2 = 3 -> sqrt(3) / 3; t(2 df) = 4.303)
    m, lo, hi = cluster_mean_ci([1.0, 2.0, 3.0], ["x", "y", "z"])
    assert hi - m == pytest.approx(4.303 * 3**0.5 / 3, abs=1e-3)
    # ten clusters of five identical items: wider than treating the 50 items as independent
    vals = [float(i % 2) for i in range(10) for _ in range(5)]
    labels = [str(i) for i in range(10) for _ in range(5)]
    assert cluster_mean_ci(vals, labels)[2] - 0.5 > mean_ci(vals)[2] - 0.5
    with pytest.raises(ValueError, match="cluster labels"):
        cluster_mean_ci([1.0], [])
