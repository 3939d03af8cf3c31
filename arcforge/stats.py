"""Confidence intervals for evaluation scores.

Binary scores (pass/fail) get a Wilson score interval, which behaves at 0% and 100% where the
normal approximation collapses; continuous scores (losses, partial credit) get mean ± 1.96 SE,
clipped to [0, 1] when every score lies there (a share cannot be negative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# suites whose score is a loss: lower is better (the report's deltas and heatmap read this)
LOWER_IS_BETTER = frozenset({"lm_loss", "long_context_nll"})


def wilson_ci(k: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval for k successes out of n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_ci(values: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(mean, lo, hi) with a normal-approximation interval on the mean."""
    n = len(values)
    if n == 0:
        return (float("nan"), float("nan"), float("nan"))
    m = sum(values) / n
    if n == 1:
        return (m, m, m)
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return (m, m - half, m + half)


# two-sided 95% Student t quantiles by degrees of freedom (beyond 30: the normal 1.96)
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def cluster_mean_ci(values: Sequence[float], clusters: Sequence[str]) -> tuple[float, float, float]:
    """(mean, lo, hi): a 95% interval on the mean of `values` when items of one cluster are not
    independent (the same function asked with another example). Cluster-robust standard error
    (CR1: sum over clusters of the squared summed residuals, times G / (G - 1)) with a t
    quantile on G - 1 degrees of freedom, as econometrics does for clustered samples; with one
    item per cluster it is the usual interval up to the t quantile."""
    n = len(values)
    if n == 0 or len(clusters) != n:
        raise ValueError(f"{n} values but {len(clusters)} cluster labels")
    m = sum(values) / n
    sums: dict[str, float] = {}
    for v, c in zip(values, clusters):
        sums[c] = sums.get(c, 0.0) + (v - m)
    g = len(sums)
    if g < 2:
        return (m, float("-inf"), float("inf"))
    se = math.sqrt(g / (g - 1) * sum(r * r for r in sums.values())) / n
    half = (_T975[g - 2] if g - 1 <= len(_T975) else 1.96) * se
    return (m, m - half, m + half)


def summarize(scores: Sequence[float]) -> dict:
    """Score, 95% CI and n; Wilson when every score is 0 or 1."""
    n = len(scores)
    if n and all(s in (0.0, 1.0) for s in scores):
        k = sum(scores)
        lo, hi = wilson_ci(k, n)
        return {"score": k / n, "ci": [lo, hi], "n": n}
    m, lo, hi = mean_ci(scores)
    if n and all(0.0 <= s <= 1.0 for s in scores):
        lo, hi = max(0.0, lo), min(1.0, hi)
    return {"score": m, "ci": [lo, hi], "n": n}
