"""report.paired_change: the interval a stage change (or `arcforge eval --against`) reports."""

from arcforge.report import paired_change
from arcforge.stats import cluster_mean_ci, mean_ci


def res(scores, clusters=None, ci=(0.0, 1.0)):
    return {
        "score": sum(scores) / len(scores),
        "ci": list(ci),
        "scores": scores,
        "clusters": clusters,
    }


def test_paired_interval_over_item_differences():
    a = [0.0] * 20 + [1.0] * 20
    b = [1.0] * 12 + [0.0] * 8 + [1.0] * 20  # 12 gained, none lost
    c = paired_change("tool", res(a), res(b))
    _, lo, hi = mean_ci([y - x for x, y in zip(a, b)])
    assert c["paired"] and not c["clustered"] and c["delta_ci"] == [lo, hi]
    assert abs(c["delta"] - 0.3) < 1e-9 and c["beyond_ci"] and c["improved"]


def test_gains_in_one_cluster_are_one_observation():
    """The same 12 gains, all on items that share one reference solution: the clustered
    interval is wider and covers 0, though the unclustered one does not."""
    a = [0.0] * 20 + [1.0] * 20
    b = [1.0] * 12 + [0.0] * 8 + [1.0] * 20
    cl = ["f"] * 12 + [f"g{i % 6}" for i in range(28)]
    c = paired_change("code", res(a, cl), res(b, cl))
    assert c["clustered"] and c["delta_ci"] == list(
        cluster_mean_ci([y - x for x, y in zip(a, b)], cl)[1:]
    )
    assert c["delta_ci"][0] < 0 < c["delta_ci"][1] and not c["improved"]


def test_lower_is_better_and_unpaired_fallback():
    up = paired_change(
        "lm_loss", {"score": 2.0, "ci": [1.9, 2.1]}, {"score": 1.5, "ci": [1.4, 1.6]}
    )
    assert not up["paired"] and up["beyond_ci"] and up["improved"]
    over = paired_change(
        "tool", {"score": 0.3, "ci": [0.2, 0.4]}, {"score": 0.35, "ci": [0.25, 0.45]}
    )
    assert over["intervals_overlap"] and not over["beyond_ci"]
