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
