"""The GLM-5 options of the LM stages, run for real through `run_pipeline` on a shrunk smoke
config with `model.preset=glm5-tiny`: a pretrain stage with an MTP head, the aux-loss-free MoE
balancer and a TensorBoard sink, then a midtrain stage that continues the MTP head and runs
DSA's warm-up and sparse phases. One run (module fixture), several checks."""

import json
from pathlib import Path

import pytest
import yaml
from transformers import AutoModelForCausalLM

from arcforge.errors import ConfigError
from arcforge.model.mtp import has_mtp, load_mtp
from arcforge.pipeline import run_pipeline
from arcforge.run_config import parse_config

# about a minute on 2 cores (a GLM-5 pretrain + midtrain run): `make test-all`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DSA = {"warmup_steps": 6, "sparse_steps": 2, "indexer_lr": 1e-3, "indexer_min_lr": 1e-4}


def tiny_glm5_config(run_dir: Path) -> dict:
    """smoke.yaml's world and tokenizer; pretrain + midtrain of a few steps each."""
    raw = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    raw["model"] = {"preset": "glm5-tiny", "max_position_embeddings": 256}
    raw["run_dir"] = str(run_dir)
    raw["logging"] = {"sinks": ["jsonl", "tensorboard"]}
    pre, mid = raw["stages"][0], raw["stages"][1]
    pre.update(tokens=6 * 512, tokens_per_batch=512, checkpoint_every=100, log_every=1)
    pre.update(heldout_docs=4, heldout_every=100, mtp={"draft_steps": 2, "weight": 0.3})
    pre["optim"] = {"lr": 3e-3, "warmup_steps": 1, "moe_bias_gamma": 1e-3}
    mid.update(tokens_per_batch=512, checkpoint_every=100, heldout_docs=4, heldout_every=100)
    mid["context_schedule"] = [{"seq_len": 128, "tokens": 2 * 512, "rope_theta": 10000}]
    mid.update(mtp={"draft_steps": 3, "align_steps": 8, "align_lr": 3e-3}, dsa=DSA)
    raw["stages"] = [pre, mid]
    return raw


@pytest.fixture(scope="module")
def glm5_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("glm5")
    cfg = parse_config(tiny_glm5_config(run_dir), "tiny glm5")
    return run_pipeline(cfg, run_dir, evaluate=False, report=False)


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_dsa_phases_run_after_midtraining_and_the_warmup_kl_falls(glm5_run):
    dsa = rows(glm5_run / "midtrain" / "dsa_metrics.jsonl")
    warm = [r["indexer_kl"] for r in dsa if r["phase"] == "dsa_warmup"]
    sparse = [r for r in dsa if r["phase"] == "dsa_sparse"]
    assert len(warm) == DSA["warmup_steps"] and len(sparse) == DSA["sparse_steps"]
    assert warm[-1] < 0.8 * warm[0]  # the indexer learns the main attention's distribution
    assert all("lm_loss" in r for r in sparse)
    done = json.loads((glm5_run / "midtrain" / "DONE").read_text())
    assert done["dsa_warmup_kl"] == [warm[0], warm[-1]]
    assert done["dsa_sparse_kl"] == [sparse[0]["indexer_kl"], sparse[-1]["indexer_kl"]]
    assert "dsa_warmup_kl" not in json.loads((glm5_run / "pretrain" / "DONE").read_text())


def test_mtp_head_is_saved_beside_weights_that_transformers_loads(glm5_run):
    for stage, depths in (("pretrain", 2), ("midtrain", 3)):
        ck = glm5_run / stage / "checkpoint"
        assert has_mtp(ck) and (ck / "model.safetensors").is_file()
        model = AutoModelForCausalLM.from_pretrained(ck)
        assert model.config.model_type == "glm_moe_dsa"
        assert load_mtp(ck, model.config).draft_steps == depths
    # the midtrain head continued the pretrain one: it moved, so it was trained again
    a = load_mtp(glm5_run / "pretrain" / "checkpoint").state_dict()
    b = load_mtp(glm5_run / "midtrain" / "checkpoint").state_dict()
    assert a.keys() == b.keys() and any(not a[k].equal(b[k]) for k in a)


def test_mtp_alignment_runs_after_midtraining_and_its_kl_falls(glm5_run):
    first, last = json.loads((glm5_run / "midtrain" / "DONE").read_text())["mtp_align_kl"]
    assert last < first  # the head moves toward the model's own distribution
    assert "mtp_align_kl" not in json.loads((glm5_run / "pretrain" / "DONE").read_text())


def test_moe_balancer_stats_and_tensorboard_sink(glm5_run):
    train = [r for r in rows(glm5_run / "pretrain" / "metrics.jsonl") if "loss" in r]
    assert train and all(r["moe_imbalance_max"] >= 1.0 for r in train)
    mid = [r for r in rows(glm5_run / "midtrain" / "metrics.jsonl") if "loss" in r]
    assert mid and mid[0]["moe_imbalance_max"] >= 1.0  # gamma 0 there: logged without balancer
    assert list((glm5_run / "pretrain" / "tensorboard").glob("events.out.tfevents.*"))


def test_dsa_and_mtp_options_are_checked(tmp_path):
    raw = tiny_glm5_config(tmp_path)
    raw["stages"][0]["dsa"] = DSA
    with pytest.raises(ConfigError, match=r"stages\[0\].*DSA.*midtrain stage, not pretrain"):
        parse_config(raw, "x.yaml")
    raw = tiny_glm5_config(tmp_path)
    raw["stages"][1]["trainer"] = {"backend": "fsdp2"}
    with pytest.raises(ConfigError, match=r"stages\[1\].*DSA phases run in one process"):
        parse_config(raw, "x.yaml")
