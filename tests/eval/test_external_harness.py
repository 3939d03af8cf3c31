"""External suites through the evaluation harness and `arcforge eval`: a checkpoint in
arcforge's format answers `reasoning_gym:` items through `CheckpointResponder` (the in-process
responder), results land in the matrix's shape with per-item ids, and bad names are refused
before anything loads."""

from __future__ import annotations

import json

import pytest
from child_runs import run_cli
from tiny_models import end_biased_nano

from arcforge.config import EvalCfg
from arcforge.errors import UserError
from arcforge.eval.harness import check_suites, evaluate_checkpoint
from arcforge.model.checkpoint import save_checkpoint
from arcforge.model.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    tok = train_tokenizer(["How many legs does a cat have? Answer: 4"] * 20, vocab_size=400)
    model = end_biased_nano(tok, max_position_embeddings=512, end_bias=3.0)
    return save_checkpoint(model, tok, tmp_path_factory.mktemp("ck") / "ckpt")


def test_an_external_suite_in_the_matrix(ckpt):
    cfg = EvalCfg(max_new_tokens=8)
    name = "reasoning_gym:leg_counting?n=5&seed=2"
    res = evaluate_checkpoint(ckpt, None, cfg, [name])[name]
    assert res["n"] == 5 and len(res["scores"]) == len(res["item_ids"]) == 5
    assert 0.0 <= res["score"] <= 1.0 and res["ci"][0] <= res["score"] <= res["ci"][1]
    assert res["meta"]["dataset"] == "leg_counting" and res["meta"]["seed"] == 2
    assert "majority_answer" in res["baselines"]
    again = evaluate_checkpoint(ckpt, None, cfg, [name])[name]
    assert again["item_ids"] == res["item_ids"] and again["scores"] == res["scores"]  # seeded


@pytest.mark.parametrize("bad", ["nope:x", "bfcl:", "reasoning_gym:leg_counting?n=zero"])
def test_bad_external_names_are_refused(bad):
    with pytest.raises(UserError):
        check_suites([bad])


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_the_cli_scores_an_external_suite_without_building_a_world(ckpt, tmp_path):
    out = tmp_path / "r.json"
    r = run_cli(
        "eval",
        str(ckpt),
        "--suites",
        "reasoning_gym:leg_counting?n=3",
        "--out",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[world]" not in r.stdout
    res = json.loads(out.read_text())["reasoning_gym:leg_counting?n=3"]
    assert res["n"] == 3
    bad = run_cli("eval", "--suites", "reasoning_gym:leg_counting", timeout=120)
    assert bad.returncode == 2 and "--endpoint" in bad.stderr
