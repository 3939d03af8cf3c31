"""The report's RL panel: reward per step per task pool, KL per teacher for distillation."""

import json

import yaml

from arcforge.report import _rl_series, _smooth, write_report


def test_series_split_pools_and_teachers_and_skip_lm_stages():
    agentic = [
        {"step": 1, "reward_mean": 0.25, "reward_tool": 0.0, "reward_tir": 0.5},
        {"step": 2, "reward_mean": 0.5, "reward_tir": 1.0},
    ]
    label, lines = _rl_series(agentic)
    assert label == "reward" and list(lines) == ["reward_mean", "tir", "tool"]
    assert lines["tir"] == [(1, 0.5), (2, 1.0)] and lines["tool"] == [(1, 0.0)]
    label, lines = _rl_series([{"step": 1, "kl_to_teacher": 0.3, "kl_sft": 0.1, "kl_rl": 0.5}])
    assert label == "KL to teacher" and set(lines) == {"kl_to_teacher", "sft", "rl"}
    assert _rl_series([{"step": 1, "loss": 2.0, "heldout_loss": 2.1}]) is None


def test_smooth_is_a_trailing_mean():
    assert _smooth([0.0, 1.0, 2.0, 3.0], 2) == [0.0, 0.5, 1.5, 2.5]
    assert _smooth([4.0, 0.0], 1) == [4.0, 0.0]


def test_report_embeds_the_rl_plot_only_when_a_stage_has_rewards(tmp_path):
    stages = [{"name": "sft", "kind": "sft"}, {"name": "arl", "kind": "agentic_rl"}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"name": "t", "stages": stages}))
    for s in stages:
        (tmp_path / s["name"]).mkdir()
        (tmp_path / s["name"] / "DONE").write_text(json.dumps({"stage": s["name"]}))
    (tmp_path / "sft" / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    write_report(tmp_path)
    assert not (tmp_path / "plots" / "rl.png").exists()
    rows = [{"step": i, "reward_mean": i / 10, "reward_tool": i / 20} for i in range(1, 11)]
    (tmp_path / "arl" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_report(tmp_path)
    assert (tmp_path / "plots" / "rl.png").stat().st_size > 1000
    assert "rl.png" in (tmp_path / "report.md").read_text()
