"""`arcforge run --nproc 2` through the real CLI and torchrun (2 CPU ranks, gloo): a pretrain
stage with the single-process trainer runs on rank 0 while rank 1 waits, then an SFT stage with
`trainer: {backend: fsdp2}` trains sharded on both ranks and exports one save_pretrained
checkpoint; rank 0 alone writes the stage files."""

import json
from pathlib import Path

import pytest
import yaml
from child_runs import ROOT, run_cli
from transformers import AutoModelForCausalLM, AutoTokenizer

pytestmark = [pytest.mark.distributed, pytest.mark.slow]  # two ranks of a run: make test-all


def tiny_config(path: Path) -> Path:
    """smoke.yaml's world and tokenizer, a few-step pretrain (single) and SFT (fsdp2)."""
    raw = yaml.safe_load((ROOT / "configs" / "smoke.yaml").read_text())
    pre, sft = raw["stages"][0], raw["stages"][2]
    pre.update(tokens=4 * 512, tokens_per_batch=512, heldout_docs=4, eval=False, log_every=1)
    sft.update(epochs=0.02, batch_size=4, max_len=256, eval=False, log_every=1)
    sft["trainer"] = {"backend": "fsdp2"}
    raw["stages"] = [pre, sft]
    path.write_text(yaml.safe_dump(raw))
    return path


def test_run_nproc_2_shards_the_fsdp2_stage_and_waits_out_the_single_one(tmp_path):
    run_dir = tmp_path / "run"
    config = str(tiny_config(tmp_path / "c.yaml"))
    r = run_cli(
        "run", config, "--nproc", "2", "--until", "sft", "--run-dir", str(run_dir), timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[pretrain] runs on rank 0 only (its trainer is not fsdp2)" in r.stdout
    assert r.stdout.count("[sft] done:") == 1  # rank 0 reports the stage
    ck = run_dir / "sft" / "checkpoint"
    model = AutoModelForCausalLM.from_pretrained(ck)
    assert len(AutoTokenizer.from_pretrained(ck)) <= model.config.vocab_size
    steps = [
        json.loads(x)["step"]
        for x in (run_dir / "sft" / "metrics.jsonl").read_text().splitlines()
        if "loss" in x
    ]
    assert steps and steps == sorted(set(steps))  # one writer: no row twice
    done = json.loads((run_dir / "sft" / "DONE").read_text())
    assert done["steps"] == len(steps)
