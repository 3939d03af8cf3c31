"""The forgetting table: best earlier stage versus the current one, and what distillation
recovered, computed from a run's eval files into report.json / report.md / report.html."""

import json

import pytest
import yaml

from arcforge.report import changes, forgetting, write_report

STAGES = [
    {"name": n, "kind": k}
    for n, k in [
        ("pretrain", "pretrain"),
        ("sft", "sft"),
        ("rl", "rl"),
        ("general", "general_rl"),
        ("distill", "distill"),
    ]
]


def r(score, lo, hi, n=100):
    return {"score": score, "ci": [lo, hi], "n": n}


MATRIX = {
    # reasoning: best before general RL is rl (0.8); general RL drops it to 0.5; distill -> 0.75
    "reasoning": {
        "pretrain": r(0.0, 0, 0.04),
        "sft": r(0.4, 0.3, 0.5),
        "rl": r(0.8, 0.71, 0.87),
        "general": r(0.5, 0.4, 0.6),
        "distill": r(0.75, 0.66, 0.82),
    },
    # general: general RL is the best so far -> forgot < 0
    "general": {
        "sft": r(0.3, 0.25, 0.35),
        "rl": r(0.32, 0.27, 0.37),
        "general": r(0.6, 0.55, 0.65),
        "distill": r(0.58, 0.53, 0.63),
    },
    # lm_loss: lower is better; best earlier 2.0 (sft), current 2.4 -> forgot 0.4; distill 2.1
    "lm_loss": {
        "pretrain": r(2.5, 2.4, 2.6),
        "sft": r(2.0, 1.9, 2.1),
        "general": r(2.4, 2.3, 2.5),
        "distill": r(2.1, 2.0, 2.2),
    },
    # only one stage evaluated: no row
    "chat": {"sft": r(0.5, 0.4, 0.6)},
}


def test_forgetting_rows_by_hand():
    rows = {x["suite"]: x for x in forgetting(MATRIX, STAGES)}
    assert set(rows) == {"reasoning", "general", "lm_loss"}
    rea = rows["reasoning"]
    assert (rea["best_stage"], rea["current_stage"], rea["final_stage"]) == (
        "rl",
        "general",
        "distill",
    )
    assert rea["forgot"] == pytest.approx(0.3) and rea["forgot_beyond_ci"]  # [.4,.6] vs [.71,.87]
    assert rea["recovered"] == pytest.approx(0.25)
    gen = rows["general"]
    assert gen["best_stage"] == "rl" and gen["forgot"] == pytest.approx(-0.28)
    assert gen["recovered"] == pytest.approx(-0.02)
    lm = rows["lm_loss"]
    assert lm["best_stage"] == "sft" and lm["forgot"] == pytest.approx(0.4)
    assert lm["recovered"] == pytest.approx(0.3)


def test_without_distillation_there_is_nothing_recovered():
    rows = forgetting({"reasoning": MATRIX["reasoning"]}, STAGES[:4])
    assert rows[0]["current_stage"] == "general" and rows[0]["final_stage"] is None
    assert rows[0]["recovered"] is None


def test_report_files_carry_the_table(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"name": "t", "stages": STAGES}))
    (tmp_path / "eval").mkdir()
    for s in STAGES:
        (tmp_path / s["name"]).mkdir()
        (tmp_path / s["name"] / "DONE").write_text(json.dumps({"seconds": 1.0}))
        res = {suite: by[s["name"]] for suite, by in MATRIX.items() if s["name"] in by}
        (tmp_path / "eval" / f"{s['name']}.json").write_text(json.dumps(res))
    md = write_report(tmp_path).read_text()
    rep = json.loads((tmp_path / "report.json").read_text())
    assert {x["suite"] for x in rep["forgetting"]} == {"reasoning", "general", "lm_loss"}
    assert "## Forgetting" in md
    assert (
        "| reasoning | 0.800 (rl) | 0.500 (general) | +0.300 | yes | 0.750 (distill) | +0.250 |"
        in md
    )
    assert "Forgetting" in (tmp_path / "report.html").read_text()


def test_changes_use_a_paired_interval_when_per_item_scores_are_known():
    # 10 items; stage b solves the 3 items a solved plus 2 more: per-item differences are
    # 0 x8 and 1 x2: mean 0.2, sd = sqrt((8 * 0.04 + 2 * 0.64) / 9) = sqrt(1.6 / 9) = 0.42164,
    # half = 1.96 * 0.42164 / sqrt(10) = 0.26134 -> paired CI [-0.061, 0.461]: not beyond
    a = [1.0] * 3 + [0.0] * 7
    b = [1.0] * 5 + [0.0] * 5
    m = {"s": {"a": r(0.3, 0.11, 0.6), "b": r(0.5, 0.24, 0.76)}}
    (c,) = changes(m, ["a", "b"], {"s": {"a": a, "b": b}})
    assert c["paired"] and c["delta_ci"] == pytest.approx([0.2 - 0.26134, 0.2 + 0.26134], abs=1e-4)
    assert not c["beyond_ci"] and c["intervals_overlap"]
    # 40 items with the same pattern: sd = sqrt((32 * 0.04 + 8 * 0.64) / 39) = 0.40510,
    # half = 1.96 * 0.40510 / sqrt(40) = 0.12554 -> [0.074, 0.326]: beyond, although
    # the two unpaired intervals still overlap
    (c,) = changes(m, ["a", "b"], {"s": {"a": a * 4, "b": b * 4}})
    assert c["delta_ci"][0] == pytest.approx(0.2 - 1.96 * 0.40510 / 40**0.5, abs=1e-4)
    assert c["beyond_ci"] and c["improved"] and c["intervals_overlap"]
    (c,) = changes(m, ["a", "b"])  # no per-item scores: the intervals must not overlap
    assert not c["paired"] and not c["beyond_ci"]
    # the same 40 items as 4 functions asked 10 times each (the gain on 2 of them): clustered,
    # the interval takes the 4 functions as the sample and no longer excludes 0
    a4 = [1.0] * 10 + [0.0] * 30
    b4 = [1.0] * 30 + [0.0] * 10
    labels = [f"f{i // 10}" for i in range(40)]
    (c,) = changes(m, ["a", "b"], {"s": {"a": a4, "b": b4}})
    assert c["beyond_ci"] and not c["clustered"]
    (c,) = changes(m, ["a", "b"], {"s": {"a": a4, "b": b4}}, {"s": {"a": labels, "b": labels}})
    assert c["clustered"] and c["paired"] and not c["beyond_ci"] and c["delta_ci"][0] < 0
