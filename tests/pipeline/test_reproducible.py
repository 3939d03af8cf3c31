"""Reproducible runs: killed with SIGKILL inside a stage and resumed, a run of `configs/smoke.yaml`
ends on checkpoints bit-identical to the uninterrupted `smoke_run`'s (tests/pipeline/conftest.py).

The kills come from the pipeline's `ARCFORGE_KILL_AFTER=<stage>:<n>` hook (SIGKILL right after the
stage's n-th metrics row). Each kill lands just after the first step logged past the stage's last
saved state, so the resume reads that state and redoes the steps after it; a stage that saves no
state before its end (SFT and distillation here) starts over. General RL is killed twice: inside
the reward model's training (not resumable: it starts over) and inside GRPO. The resumed runs
skip evaluation, so the comparison also shows that evaluating between stages leaves training
alone.

- by default (general RL and distillation again, four process starts): a copy of the smoke
  run's world, tokenizer and stages up to agentic RL, killed inside general RL (twice) and
  distillation, each resumed in a fresh process; a fresh process and one that ran the earlier
  stages leave the global RNG in different states, so this also holds the reward model's start
  independent of it;
- `slow` (a second whole run, nine process starts): the smoke chain again from nothing (its own
  world and tokenizer), killed once inside every stage kind, so the same config and seed give
  the same tensors at every stage and every stage kind resumes to them.
"""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from child_runs import quiet_env, run_python
from safetensors.torch import load_file

STAGES = ["pretrain", "midtrain", "sft", "rl", "agentic_rl", "general_rl", "distill"]
RUN = (
    "import sys; from pathlib import Path; from arcforge.run_config import load_config; "
    "from arcforge.pipeline import run_pipeline; "
    "run_pipeline(load_config('configs/smoke.yaml'), Path(sys.argv[1]), evaluate=False, "
    "report=False)"
)


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def kill_row(ref: Path) -> int:
    """ARCFORGE_KILL_AFTER's n for a stage whose uninterrupted run is `ref`: the rows written up
    to the metrics row of the first logged step past the last state saved before the end
    (probe.jsonl rows of earlier steps and the reward model's rows come before it)."""
    every = yaml.safe_load((ref / "config.yaml").read_text())["checkpoint_every"]
    steps = [r["step"] for r in rows(ref / "metrics.jsonl")]
    saved = (max(steps) - 1) // every * every
    target = min(s for s in steps if s > saved)
    return (
        sum(s <= target for s in steps)
        + sum(r["step"] < target for r in rows(ref / "probe.jsonl"))
        + len(rows(ref / "orm" / "metrics.jsonl"))
    )


def run(run_dir: Path, kill: str | None) -> subprocess.CompletedProcess:
    env = quiet_env()
    env.pop("ARCFORGE_KILL_AFTER", None)
    if kill:
        env["ARCFORGE_KILL_AFTER"] = kill
    return run_python("-c", RUN, str(run_dir), env=env, timeout=600)


def killed_and_resumed(run_dir: Path, kills: list[tuple[str, int]]) -> list[str]:
    """Run once per kill (each must die inside its stage), then once to the end."""
    done = []
    for stage, n in kills:
        r = run(run_dir, f"{stage}:{n}")
        assert r.returncode == -signal.SIGKILL, f"{stage}:{n} not killed: {r.stderr[-2000:]}"
        assert not (run_dir / stage / "DONE").exists()
        done.append(stage)
    r = run(run_dir, None)
    assert r.returncode == 0, r.stderr[-3000:]
    return done


def late_kills(ref: Path) -> list[tuple[str, int]]:
    """Inside the reward model's training, inside GRPO, inside distillation."""
    orm_rows = len(rows(ref / "general_rl" / "orm" / "metrics.jsonl"))
    return [
        ("general_rl", orm_rows // 2),
        ("general_rl", kill_row(ref / "general_rl")),
        ("distill", kill_row(ref / "distill")),
    ]


def safetensors_files(run_dir: Path, stages: list[str]) -> list[Path]:
    """The stages' checkpoint weights and the general-RL reward model's (head, backbone)."""
    files = [p for s in stages for p in (run_dir / s / "checkpoint").glob("*.safetensors")]
    files += sorted((run_dir / "general_rl" / "orm").rglob("*.safetensors"))
    return [p.relative_to(run_dir) for p in files]


def assert_same_checkpoints(ref: Path, got: Path, stages: list[str]) -> None:
    """Every tensor equal bit for bit; each checkpoint's tokenizer the same too."""
    files = safetensors_files(ref, stages)
    assert {f.parts[0] for f in files} == set(stages)  # every stage wrote weights
    assert files == safetensors_files(got, stages)
    differ = []
    for f in files:
        a, b = load_file(str(ref / f)), load_file(str(got / f))
        assert a.keys() == b.keys(), f
        differ += [f"{f}:{k}" for k in a if not torch.equal(a[k], b[k])]
    assert differ == []
    for s in stages:
        tok = Path(s) / "checkpoint" / "tokenizer.json"
        assert (ref / tok).read_text() == (got / tok).read_text()


def assert_same_logs(ref: Path, got: Path, stages: list[str]) -> None:
    """Each stage's metrics rows are the uninterrupted run's steps, once each; general RL's
    reward log has the same rows (a resume drops the rows of the steps it redoes)."""
    for s in stages:
        for log in ("metrics.jsonl", "probe.jsonl", "orm/metrics.jsonl"):
            want = [(r["step"], sorted(r)) for r in rows(ref / s / log)]
            assert [(r["step"], sorted(r)) for r in rows(got / s / log)] == want, (s, log)
    reward = "general_rl/reward.jsonl"
    assert rows(got / reward) == rows(ref / reward)


def test_the_kill_hook_fires_after_the_named_stages_nth_row_only(tmp_path, monkeypatch):
    """`ARCFORGE_KILL_AFTER=s:2`: armed for stage s, the process dies right after the 2nd
    metrics row written from then on (rows before arming do not count, none follows); arming
    another stage does nothing; a malformed count is a UserError."""
    code = (
        "import sys; from pathlib import Path; from arcforge.pipeline import arm_kill_hook; "
        "from arcforge.metrics import JsonlSink; assert arm_kill_hook('t') is None; "
        "log = JsonlSink(Path(sys.argv[1])); log.log(1, {}); "
        "arm_kill_hook('s'); [log.log(i, {}) for i in range(2, 9)]"
    )
    path = tmp_path / "m.jsonl"
    env = {**os.environ, "ARCFORGE_KILL_AFTER": "s:2"}
    r = run_python("-c", code, str(path), env=env, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert [x["step"] for x in rows(path)] == [1, 2, 3]
    from arcforge.errors import UserError
    from arcforge.pipeline import arm_kill_hook

    monkeypatch.setenv("ARCFORGE_KILL_AFTER", "s:two")
    with pytest.raises(UserError, match="positive integer"):
        arm_kill_hook("s")


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_general_rl_and_distill_resume_to_the_uninterrupted_checkpoints(smoke_run, tmp_path):
    for d in ["world", "tokenizer", *STAGES[:5]]:
        shutil.copytree(smoke_run / d, tmp_path / d)
    kills = late_kills(smoke_run)
    assert killed_and_resumed(tmp_path, kills) == ["general_rl", "general_rl", "distill"]
    assert_same_checkpoints(smoke_run, tmp_path, STAGES[5:])
    assert_same_logs(smoke_run, tmp_path, STAGES[5:])


@pytest.mark.slow
def test_a_second_run_killed_in_every_stage_kind_ends_on_the_same_checkpoints(smoke_run, tmp_path):
    kills = [(s, kill_row(smoke_run / s)) for s in STAGES[:5]] + late_kills(smoke_run)
    assert [k for k, _ in kills] == STAGES[:5] + ["general_rl", "general_rl", "distill"]
    killed_and_resumed(tmp_path, kills)
    # first the data every stage reads (a world differs when its code changed between the runs)
    world = smoke_run / "world"
    data = [
        *world.glob("*.json*"),
        *world.glob("tasks/*.jsonl"),
        smoke_run / "tokenizer" / "tokenizer.json",
    ]
    for f in data:
        rel = f.relative_to(smoke_run)
        assert (tmp_path / rel).read_bytes() == f.read_bytes(), rel
    assert_same_checkpoints(smoke_run, tmp_path, STAGES)
    assert_same_logs(smoke_run, tmp_path, STAGES)
