"""The stage graph: world → tokenizer → stages in order → evaluation → report, with resume.

Each stage writes `RUN_DIR/<stage>/` (the `checkpoint/` save_pretrained dir, `metrics.jsonl`,
`config.yaml` with the stage's resolved config, and `DONE` once finished). Rerunning skips
stages whose DONE exists and resumes an interrupted stage from its `state/`. Each stage model
maps to its runner (both in `arcforge/stages/<kind>.py`) in `RUNNERS`.

For resume tests, `ARCFORGE_KILL_AFTER=<stage>:<n>` makes the process SIGKILL itself right
after the n-th metrics row (`MetricsLog.write`, any of the stage's logs: an RL stage writes one
per step, the general-RL stage its reward model's steps first) written while stage <stage>
runs: a crash at a chosen, repeatable point, with nothing flushed or cleaned up.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from arcforge.config import StageCfg
from arcforge.data.sources import register_run_dir
from arcforge.errors import UserError
from arcforge.eval.harness import evaluate_run
from arcforge.report import write_report
from arcforge.run_config import RunCfg, dump_config
from arcforge.stages.agentic_rl import AgenticRLStageCfg, run_agentic_rl_stage
from arcforge.stages.common import RunContext
from arcforge.stages.distill import DistillStageCfg, run_distill_stage
from arcforge.stages.general_rl import GeneralRLStageCfg, run_general_rl_stage
from arcforge.stages.lm import LMStageCfg, run_lm_stage
from arcforge.stages.rl import RLStageCfg, run_rl_stage
from arcforge.stages.sft import SFTStageCfg, run_sft_stage
from arcforge.stages.synth import SynthStageCfg, run_synth_stage
from arcforge.train.loop import MetricsLog

__all__ = ["RUNNERS", "RunContext", "run_pipeline", "run_stage"]

StageRunner = Callable[[RunContext, StageCfg, Path], dict]
# each stage model's runner: it trains (or synthesizes) into the stage dir, returns its summary
RUNNERS: dict[type[StageCfg], StageRunner] = {
    LMStageCfg: run_lm_stage,
    SFTStageCfg: run_sft_stage,
    SynthStageCfg: run_synth_stage,
    RLStageCfg: run_rl_stage,
    AgenticRLStageCfg: run_agentic_rl_stage,
    GeneralRLStageCfg: run_general_rl_stage,
    DistillStageCfg: run_distill_stage,
}


def default_run_dir(cfg: RunCfg) -> Path:
    return Path(cfg.run_dir or f"runs/{cfg.name}")


def stage_done(run_dir: Path, name: str) -> bool:
    return (run_dir / name / "DONE").exists()


KILL_ENV = "ARCFORGE_KILL_AFTER"


def arm_kill_hook(stage_name: str) -> Callable[[], None] | None:
    """With `ARCFORGE_KILL_AFTER=<stage_name>:<n>`, SIGKILL this process right after the n-th
    metrics row from now; returns the function that disarms it (None when the variable names
    no such stage)."""
    spec = os.environ.get(KILL_ENV, "")
    name, _, n = spec.rpartition(":")
    if name != stage_name:
        return None
    if not n.isdigit() or int(n) < 1:
        raise UserError(f"{KILL_ENV}={spec!r}: expected <stage>:<rows>, rows a positive integer")
    write, left = MetricsLog.write, [int(n)]

    def write_then_maybe_kill(self, **row) -> None:
        write(self, **row)
        left[0] -= 1
        if left[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    MetricsLog.write = write_then_maybe_kill  # type: ignore[method-assign]
    return lambda: setattr(MetricsLog, "write", write)


def run_stage(ctx: RunContext, stage: StageCfg) -> dict:
    """Run one stage unless it is done; returns its summary."""
    out = ctx.stage_dir(stage.name)
    if stage_done(ctx.run_dir, stage.name):
        return json.loads((out / "DONE").read_text())
    runner = RUNNERS[type(stage)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(stage.model_dump(mode="json"), sort_keys=False))
    t0 = time.time()
    disarm = arm_kill_hook(stage.name)
    try:
        summary = runner(ctx, stage, out)
    finally:
        if disarm is not None:
            disarm()
    summary = {"stage": stage.name, "kind": stage.kind, "seconds": time.time() - t0, **summary}
    (out / "DONE").write_text(json.dumps(summary, indent=1))
    return summary


def record_seconds(run_dir: Path, key: str, seconds: float, stage: str | None = None) -> None:
    """Note measured wall seconds in RUN_DIR/timing.json (`setup_seconds`: world and tokenizer
    generation; `eval_seconds[stage]`: a stage's evaluation), which the report adds to each
    stage's own `seconds` (its DONE summary) for the run's total."""
    path = run_dir / "timing.json"
    timing = json.loads(path.read_text()) if path.exists() else {}
    if stage is None:
        timing[key] = round(seconds, 2)
    else:
        timing.setdefault(key, {})[stage] = round(seconds, 2)
    path.write_text(json.dumps(timing, indent=1) + "\n")


def run_pipeline(
    cfg: RunCfg,
    run_dir: Path | None = None,
    until: str | None = None,
    evaluate: bool = True,
    report: bool = True,
) -> Path:
    """Run every stage (up to and including the stage named `until`), evaluate each
    checkpoint, write the report."""
    if until is not None and until not in [s.name for s in cfg.stages]:
        raise UserError(f"no stage named {until!r}; stages: {[s.name for s in cfg.stages]}")
    run_dir = Path(run_dir or default_run_dir(cfg))
    ctx = RunContext(cfg, run_dir)  # first: a device that is not there fails before any file
    run_dir.mkdir(parents=True, exist_ok=True)
    register_run_dir(str(run_dir))  # `{run_dir}` in source paths
    fresh = not (run_dir / "world" / "DONE").exists()
    t0 = time.time()
    ctx.world  # noqa: B018  (world and tokenizer first: every stage needs them)
    ctx.tokenizer  # noqa: B018
    if fresh:  # generated now (a resumed run only reads them back)
        record_seconds(run_dir, "setup_seconds", time.time() - t0)
    (run_dir / "config.yaml").write_text(dump_config(cfg))  # once the saved world agrees
    for stage in cfg.stages:
        summary = run_stage(ctx, stage)
        print(
            f"[{stage.name}] done: "
            + ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in summary.items()
                if k not in ("stage", "kind")
            )
        )
        if evaluate:
            measured = not (run_dir / "eval" / f"{stage.name}.json").exists()
            t0 = time.time()
            evaluate_run(ctx, only=[stage.name])
            if measured:  # evaluated now, not read from an earlier session's results
                record_seconds(run_dir, "eval_seconds", time.time() - t0, stage.name)
        if until and stage.name == until:
            break
    if report:
        write_report(run_dir)
    return run_dir
