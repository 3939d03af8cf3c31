"""`evaluate_run` fingerprints each checkpoint's weights: a stage whose weights equal an already
evaluated stage's reuses those results (evaluation is seeded) instead of running the suites again;
a stage with different weights is evaluated for real."""

from __future__ import annotations

import json
import shutil

import torch

from arcforge.eval.harness import evaluate_run, weights_fingerprint
from arcforge.model.checkpoint import init_model, save_checkpoint
from arcforge.model.presets import build_config
from arcforge.pipeline import RunContext
from arcforge.run_config import parse_config


def test_identical_weights_reuse_results_and_changed_weights_do_not(world, tok, tmp_path):
    cfg = parse_config(
        {
            "name": "t",
            "world": {"seed": 7, "scale": 0.1},
            "stages": [
                {"name": "a", "kind": "rl", "steps": 1, "sources": [{"source": "world:reasoning"}]},
                {"name": "b", "kind": "rl", "steps": 1, "sources": [{"source": "world:reasoning"}]},
                {"name": "c", "kind": "rl", "steps": 1, "sources": [{"source": "world:reasoning"}]},
            ],
            "eval": {"suites": ["lm_loss", "tool_format"], "n": 3, "max_new_tokens": 8},
        }
    )
    model = init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=512), 0)
    save_checkpoint(model, tok, tmp_path / "a" / "checkpoint")
    shutil.copytree(tmp_path / "a" / "checkpoint", tmp_path / "b" / "checkpoint")
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    save_checkpoint(model, tok, tmp_path / "c" / "checkpoint")
    for s in "abc":
        (tmp_path / s / "DONE").write_text("{}")
    fp = {s: weights_fingerprint(tmp_path / s / "checkpoint") for s in "abc"}
    assert fp["a"] == fp["b"] != fp["c"]

    ctx = RunContext(cfg, tmp_path, _world=world)
    evaluate_run(ctx, only=["a"])
    evaluate_run(ctx, only=["b", "c"])
    res = {s: json.loads((tmp_path / "eval" / f"{s}.json").read_text()) for s in "abc"}
    for suite in ("lm_loss", "tool_format"):
        assert "reused_from" not in res["a"][suite] and "reused_from" not in res["c"][suite]
        assert res["b"][suite]["reused_from"] == "a"
        assert res["b"][suite]["scores"] == res["a"][suite]["scores"]
        assert res["c"][suite]["weights"] == fp["c"]
    # the perturbed model is really evaluated: its held-out loss differs from a's
    assert res["c"]["lm_loss"]["scores"] != res["a"]["lm_loss"]["scores"]


def test_a_cached_result_with_other_settings_is_evaluated_again(world, tok, tmp_path):
    def config(n_tool_format: int):
        return parse_config(
            {
                "name": "t",
                "world": {"seed": 7, "scale": 0.1},
                "stages": [
                    {
                        "name": s,
                        "kind": "rl",
                        "steps": 1,
                        "sources": [{"source": "world:reasoning"}],
                    }
                    for s in "ab"
                ],
                "eval": {
                    "suites": ["lm_loss", "tool_format"],
                    "n": 3,
                    "max_new_tokens": 8,
                    "n_per_suite": {"tool_format": n_tool_format},
                },
            }
        )

    model = init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=512), 0)
    save_checkpoint(model, tok, tmp_path / "a" / "checkpoint")
    shutil.copytree(tmp_path / "a" / "checkpoint", tmp_path / "b" / "checkpoint")
    for s in "ab":
        (tmp_path / s / "DONE").write_text("{}")
    evaluate_run(RunContext(config(2), tmp_path, _world=world), only=["a"])
    first = json.loads((tmp_path / "eval" / "a.json").read_text())
    assert first["tool_format"]["n"] == 2 and first["tool_format"]["settings"]["n"] == 2

    # a larger sample is configured: stage a's tool_format is run again, its lm_loss is kept;
    # stage b (same weights) may not take a's old 2-task result either
    evaluate_run(RunContext(config(4), tmp_path, _world=world), only=["a", "b"])
    again = json.loads((tmp_path / "eval" / "a.json").read_text())
    b = json.loads((tmp_path / "eval" / "b.json").read_text())
    assert again["tool_format"]["n"] == 4 and len(again["tool_format"]["scores"]) == 4
    assert again["lm_loss"]["seconds"] == first["lm_loss"]["seconds"]  # the cached one
    assert b["tool_format"]["n"] == 4 and b["tool_format"]["reused_from"] == "a"
