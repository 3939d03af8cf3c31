"""The smoke config runs world → tokenizer → pretrain → midtrain → SFT → eval → report through
the real CLI (the session's `smoke_run`, tests/pipeline/conftest.py); a rerun skips every
finished stage; checkpoints load with plain transformers."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

# The smoke run (every stage through the CLI, about a minute) and the CLI checks on it take
# about two minutes in all: `make test-all` runs them, so `make test` stays under 10 minutes.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STAGES = ["pretrain", "midtrain", "sft", "rl", "agentic_rl", "general_rl", "distill"]
SUPERVISED = ["pretrain", "midtrain", "sft"]


def cli(*args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARCFORGE_PROGRESS": "0"}
    return subprocess.run(
        [sys.executable, "-m", "arcforge.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_report_json_shape(smoke_run):
    rep = json.loads((smoke_run / "report.json").read_text())
    assert [s["name"] for s in rep["stages"]] == STAGES
    for suite in ["lm_loss", "reasoning", "tool_format", "long_context", "chat"]:
        for stage in STAGES:
            if suite == "chat" and stage == "pretrain":  # eval_skip in smoke.yaml
                assert stage not in rep["matrix"][suite]
                continue
            r = rep["matrix"][suite][stage]
            assert r["n"] > 0 and r["ci"][0] <= r["score"] <= r["ci"][1]
    for f in ["report.md", "report.html", "plots/loss.png", "plots/rl.png", "plots/matrix.png"]:
        assert (smoke_run / f).stat().st_size > 100


def test_loss_is_finite_and_falls(smoke_run):
    for stage in SUPERVISED:
        rows = [
            json.loads(x) for x in (smoke_run / stage / "metrics.jsonl").read_text().splitlines()
        ]
        losses = [r["loss"] for r in rows if "loss" in r]
        assert losses and all(math.isfinite(v) for v in losses)
    held = [
        json.loads(x) for x in (smoke_run / "pretrain" / "metrics.jsonl").read_text().splitlines()
    ]
    held = [r["heldout_loss"] for r in held if "heldout_loss" in r]
    assert held[-1] < held[0] - 0.5  # from ~log(V) at init to something learned


def test_checkpoints_load_with_transformers_and_differ(smoke_run):
    weights = []
    for stage in SUPERVISED:
        ck = smoke_run / stage / "checkpoint"
        m = AutoModelForCausalLM.from_pretrained(ck)
        tok = AutoTokenizer.from_pretrained(ck)
        assert len(tok) <= m.config.vocab_size
        assert tok.convert_tokens_to_ids("<|end|>") != tok.unk_token_id
        weights.append(m.model.layers[0].self_attn.q_proj.weight.detach().clone())
    for a, b in zip(weights, weights[1:]):
        assert not torch.allclose(a, b)
    mid = AutoModelForCausalLM.from_pretrained(smoke_run / "midtrain" / "checkpoint")
    theta = mid.config.rope_parameters["rope_theta"]
    assert theta == 20000.0  # the last context stage's RoPE base is saved with the checkpoint


def test_rerun_skips_finished_stages(smoke_run):
    before = {s: (smoke_run / s / "DONE").stat().st_mtime for s in STAGES}
    t0 = time.time()
    r = cli("run", "configs/smoke.yaml", "--run-dir", str(smoke_run))
    assert r.returncode == 0, r.stderr[-2000:]
    assert time.time() - t0 < 60
    assert {s: (smoke_run / s / "DONE").stat().st_mtime for s in STAGES} == before


@pytest.mark.slow  # ~10 s: make test-all
def test_report_command_regenerates(smoke_run):
    (smoke_run / "report.json").unlink()
    r = cli("report", str(smoke_run))
    assert r.returncode == 0 and (smoke_run / "report.json").exists()
    r = cli("report", str(smoke_run / "nope"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_eval_checks_its_target_and_suites_first(smoke_run):
    r = cli("eval", str(smoke_run / "nope"), timeout=60)
    assert r.returncode == 2 and "neither a checkpoint" in r.stderr and "Traceback" not in r.stderr
    r = cli("eval", str(smoke_run / "sft" / "checkpoint"), "--suites", "reasoning,nosuch")
    assert r.returncode == 2 and "nosuch" in r.stderr


def test_eval_writes_agent_episodes_and_their_outcomes(smoke_run, tmp_path):
    ck, out = smoke_run / "sft" / "checkpoint", tmp_path / "episodes"
    r = cli(
        "eval",
        str(ck),
        "--suites",
        "tool",
        "--config",
        "configs/smoke.yaml",
        "--episodes",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)["tool"]
    rows = [json.loads(x) for x in (out / "tool.jsonl").read_text().splitlines()]
    assert len(rows) == res["n"] == sum(res["outcomes"].values())
    assert sum(x["outcome"] == "solved" for x in rows) == round(res["score"] * res["n"])
    assert sum(c[1] for c in res["by_hops"].values()) == res["n"]
    assert sum(c[0] for c in res["by_hops"].values()) == round(res["score"] * res["n"])
    assert all(any(m["role"] == "user" for m in x["messages"]) for x in rows)


@pytest.mark.slow  # two checkpoints evaluated twice (~30 s): make test-all
def test_eval_out_and_against_compare_two_checkpoints(smoke_run, tmp_path):
    """--out keeps the per-item scores; --against prints the paired change from that file,
    whose delta is the mean per-item difference of the two files."""
    a, b = tmp_path / "sft.json", tmp_path / "rl.json"
    base = ("--suites", "tool,reasoning", "--config", "configs/smoke.yaml")
    r = cli("eval", str(smoke_run / "sft" / "checkpoint"), *base, "--out", str(a))
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli(
        "eval", str(smoke_run / "rl" / "checkpoint"), *base, "--out", str(b), "--against", str(a)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    for suite in ("tool", "reasoning"):
        xa, xb = ra[suite]["scores"], rb[suite]["scores"]
        assert len(xa) == len(xb) == ra[suite]["n"]
        delta = sum(y - x for x, y in zip(xa, xb)) / len(xa)
        line = next(x for x in r.stdout.splitlines() if x.strip().startswith(f"{suite}:"))
        assert f"delta {delta:+.3f}" in line and "95% CI" in line
    a.write_text('{"tool": [1, 2]}')
    r = cli("eval", str(smoke_run / "rl" / "checkpoint"), *base, "--against", str(a))
    assert r.returncode == 2 and "not an `arcforge eval --out`" in r.stderr
    assert "Traceback" not in r.stderr
    r = cli("eval", str(smoke_run), "--out", str(a))
    assert r.returncode == 2 and "checkpoint target" in r.stderr


def test_a_config_that_no_longer_matches_the_saved_world_is_refused(smoke_run):
    before = (smoke_run / "config.yaml").read_text()
    r = cli(
        "run", "configs/smoke.yaml", "--run-dir", str(smoke_run), "world.options.episodes.tool=7"
    )
    assert r.returncode == 2
    assert "episodes.tool" in r.stderr and "Traceback" not in r.stderr
    assert (smoke_run / "config.yaml").read_text() == before  # the run dir is left alone


def test_agentic_rl_ends_on_the_probed_step_its_rule_keeps(smoke_run):
    """The smoke agentic-RL stage probes dev tasks at steps 0, 1, 2 (each item's score logged)
    and its checkpoint holds the weights of the step `probe.keep` picks: the last step's, or an
    earlier best one's (the start's for step 0) when the last fell beyond its interval."""
    from safetensors.torch import load_file

    from arcforge.train.async_rl import kept_probe

    out = smoke_run / "agentic_rl"
    probes = [json.loads(x) for x in (out / "probe.jsonl").read_text().splitlines()]
    assert [p["step"] for p in probes] == [0, 1, 2]
    assert all(
        0.0 <= p["probe_tool"] <= 1.0
        and p["mean"] == p["probe_tool"]
        and p["probe_tool"] == sum(p["items_tool"]) / 3
        for p in probes
    )
    keep = yaml.safe_load((out / "config.yaml").read_text())["probe"]["keep"]
    kept = kept_probe(probes, keep)["step"]
    summary = json.loads((out / "DONE").read_text())
    assert summary["kept_step"] == kept and set(summary["probe_mean"]) == {"0", "1", "2"}
    final = load_file(str(out / "checkpoint" / "model.safetensors"))
    ref_path = (
        out / "state" / "model.safetensors"
        if kept == 2
        else smoke_run / "rl" / "checkpoint" / "model.safetensors"
        if kept == 0
        else out / "probe" / f"best-{kept}.safetensors"
    )
    ref = load_file(str(ref_path))
    shared = set(final) & set(ref)
    assert shared and all(torch.equal(final[k], ref[k]) for k in shared)


def test_run_until_stops_after_the_named_stage(smoke_run):
    """`run --until STAGE` takes a stage name or kind; on the finished run it goes through the
    done stages up to that one and no further; an unknown stage is one line naming the stages."""
    r = cli("run", "configs/smoke.yaml", "--run-dir", str(smoke_run), "--until", "midtrain")
    assert r.returncode == 0, r.stderr[-2000:]
    done = [ln.split("]")[0][1:] for ln in r.stdout.splitlines() if "] done:" in ln]
    assert done == ["pretrain", "midtrain"]
    r = cli("run", "configs/smoke.yaml", "--run-dir", str(smoke_run), "--until", "nosuch")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "'general_rl'" in lines[0]


def test_help_lists_run_until_and_eval_subcommands():
    """--help shows `run --until` and `eval judge` / `eval contamination`; a stage kind or a
    hyphenated eval name is no command of its own."""
    top = cli("--help", timeout=60).stdout
    assert " run " in top and " eval " in top
    assert not any(f" {c} " in top for c in ("pretrain", "sft", "agentic-rl", "eval-judge"))
    assert "--until" in cli("run", "--help", timeout=60).stdout
    sub = cli("eval", "--help", timeout=60).stdout
    assert all(c in sub for c in ("matrix", "judge", "contamination"))
    for args in (["eval", "judge"], ["eval", "contamination"]):
        r = cli(*args, "--help", timeout=60)
        assert r.returncode == 0 and f"{' '.join(args)} [OPTIONS]" in r.stdout, args
    for alias in ("sft", "eval-judge"):
        r = cli(alias, "--help", timeout=60)
        assert r.returncode == 2 and "No such command" in r.stderr, alias
