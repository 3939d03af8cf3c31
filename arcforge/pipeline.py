"""The stage graph: world → tokenizer → stages in order → evaluation → report, with resume.

Each stage writes `RUN_DIR/<stage>/` (the `checkpoint/` save_pretrained dir, `metrics.jsonl`,
`config.yaml` with the stage's resolved config, and `DONE` once finished). Rerunning skips
stages whose DONE exists and resumes an interrupted stage from its `state/`. Each stage model
maps to its runner (both in `arcforge/stages/<kind>.py`) in `RUNNERS`.

For resume tests, `ARCFORGE_KILL_AFTER=<stage>:<n>` makes the process SIGKILL itself right
after the n-th metrics row written while stage <stage> runs (every row of the stage's JSONL
logs, metrics.jsonl, probe.jsonl and dsa_metrics.jsonl, counted by an `arcforge.metrics.on_write`
hook; the general-RL stage logs its reward model's steps first): a crash at a chosen,
repeatable point, with nothing flushed or cleaned up.

Under torchrun (`arcforge run --nproc N`, WORLD_SIZE > 1) every rank runs this function: rank 0
prepares the world and tokenizer while the others wait, then they read them back; stages whose
`trainer` is fsdp2 run on every rank (rank 0 writes the stage's files), the others on rank 0
alone; evaluation and the report run on rank 0. Ranks wait for rank 0 by polling marker files
under `RUN_DIR/.ranks/<launch id>/` rather than at a collective barrier, whose timeout a long
single-process stage or evaluation would exceed; a rank that fails makes torchrun stop the rest.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from arcforge.audit.checks import run_audits
from arcforge.config import StageCfg
from arcforge.errors import UserError
from arcforge.eval.harness import evaluate_run
from arcforge.metrics import on_write
from arcforge.report import write_report
from arcforge.run_config import RunCfg, dump_config
from arcforge.stages.agentic_rl import AgenticRLStageCfg, run_agentic_rl_stage
from arcforge.stages.context import RunContext
from arcforge.stages.distill import DistillStageCfg, run_distill_stage
from arcforge.stages.general_rl import GeneralRLStageCfg, run_general_rl_stage
from arcforge.stages.lm import LMStageCfg, run_lm_stage
from arcforge.stages.rl import RLStageCfg, run_rl_stage
from arcforge.stages.sft import SFTStageCfg, run_sft_stage
from arcforge.stages.synth import SynthStageCfg, run_synth_stage

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
    left = [int(n)]

    def count_row(path: Path, record: dict) -> None:
        left[0] -= 1
        if left[0] == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    return on_write(count_row)


def run_stage(ctx: RunContext, stage: StageCfg) -> dict:
    """Run one stage unless it is done; returns its summary."""
    out = ctx.stage_dir(stage.name)
    if stage_done(ctx.run_dir, stage.name):
        return json.loads((out / "DONE").read_text())
    runner = RUNNERS[type(stage)]
    main = RankSync.current().main
    out.mkdir(parents=True, exist_ok=True)
    if main:
        dumped = yaml.safe_dump(stage.model_dump(mode="json"), sort_keys=False)
        (out / "config.yaml").write_text(dumped)
    t0 = time.time()
    disarm = arm_kill_hook(stage.name)
    try:
        summary = runner(ctx, stage, out)
    finally:
        if disarm is not None:
            disarm()
    summary = {"stage": stage.name, "kind": stage.kind, "seconds": time.time() - t0, **summary}
    if main:
        (out / "DONE").write_text(json.dumps(summary, indent=1))
    return summary


@dataclass(frozen=True)
class RankSync:
    """This process's place in a torchrun launch (rank 0 of 1 outside one), and the marker
    files through which the other ranks wait for rank 0."""

    rank: int
    world: int
    launch: str  # the torchrun launch's id: markers of an earlier launch do not count

    @staticmethod
    def current() -> RankSync:
        env = os.environ
        launch = env.get("TORCHELASTIC_RUN_ID") or env.get("MASTER_PORT", "")
        return RankSync(int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), launch)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def _marker(self, run_dir: Path, tag: str) -> Path:
        return run_dir / ".ranks" / self.launch / tag

    def signal(self, run_dir: Path, tag: str) -> None:
        """Rank 0: `tag` is done (a no-op in a single process)."""
        if self.world > 1 and self.main:
            path = self._marker(run_dir, tag)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def wait(self, run_dir: Path, tag: str, poll: float = 0.2) -> None:
        """Other ranks: block until rank 0 signals `tag`."""
        if self.world > 1 and not self.main:
            while not self._marker(run_dir, tag).exists():
                time.sleep(poll)


def is_sharded_stage(stage: StageCfg) -> bool:
    """Whether the stage trains on every rank (its `trainer` is fsdp2)."""
    trainer = getattr(stage, "trainer", None)
    return getattr(trainer, "backend", "single") == "fsdp2"


def _print_summary(stage: StageCfg, summary: dict) -> None:
    print(
        f"[{stage.name}] done: "
        + ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in summary.items()
            if k not in ("stage", "kind")
        )
    )


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
    checkpoint, run the audits (arcforge.audit.checks), write the report."""
    if until is not None and until not in [s.name for s in cfg.stages]:
        raise UserError(f"no stage named {until!r}; stages: {[s.name for s in cfg.stages]}")
    run_dir = Path(run_dir or default_run_dir(cfg))
    ctx = RunContext(cfg, run_dir)  # first: a device that is not there fails before any file
    run_dir.mkdir(parents=True, exist_ok=True)
    ranks = RankSync.current()
    fresh = not (run_dir / "world" / "DONE").exists()
    t0 = time.time()
    ranks.wait(run_dir, "setup")  # rank 0 generates them; the others read them back
    ctx.world  # noqa: B018  (world and tokenizer first: every stage needs them)
    ctx.tokenizer  # noqa: B018
    if ranks.main:
        if fresh:  # generated now (a resumed run only reads them back)
            record_seconds(run_dir, "setup_seconds", time.time() - t0)
        (run_dir / "config.yaml").write_text(dump_config(cfg))  # once the saved world agrees
    ranks.signal(run_dir, "setup")
    if ranks.main and evaluate and cfg.eval.base and cfg.model.path:
        measured = not (run_dir / "eval" / "base.json").exists()
        t0 = time.time()
        evaluate_run(ctx, only=["base"])  # the real checkpoint every stage is compared with
        if measured:
            record_seconds(run_dir, "eval_seconds", time.time() - t0, "base")
    for stage in cfg.stages:
        if ranks.world > 1 and not is_sharded_stage(stage):
            if ranks.main:
                print(
                    f"[{stage.name}] runs on rank 0 only (its trainer is not fsdp2); "
                    f"the other {ranks.world - 1} rank(s) wait"
                )
            else:
                ranks.wait(run_dir, stage.name)
        if ranks.main or is_sharded_stage(stage):
            summary = run_stage(ctx, stage)
            if ranks.main:
                _print_summary(stage, summary)
        if ranks.main and evaluate:
            measured = not (run_dir / "eval" / f"{stage.name}.json").exists()
            t0 = time.time()
            evaluate_run(ctx, only=[stage.name])
            if measured:  # evaluated now, not read from an earlier session's results
                record_seconds(run_dir, "eval_seconds", time.time() - t0, stage.name)
        ranks.signal(run_dir, stage.name)
        ranks.wait(run_dir, stage.name)  # a sharded stage's evaluation, before the next stage
        if until and stage.name == until:
            break
    if report and ranks.main:
        run_audits(run_dir)
        write_report(run_dir)
    return run_dir
