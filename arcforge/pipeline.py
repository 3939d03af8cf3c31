"""The stage graph: world → tokenizer → stages in order → evaluation → report, with resume.

Each stage writes `RUN_DIR/<stage>/` (the `checkpoint/` save_pretrained dir, `metrics.jsonl`,
`config.yaml` with the stage's resolved config, and `DONE` once finished). Rerunning skips
stages whose DONE exists and resumes an interrupted stage from its `state/`. Stage kinds map to
runner functions in `STAGE_RUNNERS`; later stages (RL, distillation) register there too.

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
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from arcforge.config import RunCfg, StageCfg, dump_config
from arcforge.errors import UserError

StageRunner = Callable[["RunContext", StageCfg, Path], dict]
STAGE_RUNNERS: dict[str, StageRunner] = {}


def register_stage(*kinds: str) -> Callable[[StageRunner], StageRunner]:
    def deco(fn: StageRunner) -> StageRunner:
        for k in kinds:
            STAGE_RUNNERS[k] = fn
        return fn

    return deco


@dataclass
class RunContext:
    """What every stage runner gets: the config, the run dir, the lazily built world/tokenizer."""

    cfg: RunCfg
    run_dir: Path
    _world: object | None = field(default=None, repr=False)
    _tokenizer: object | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from arcforge.device import set_run_device

        set_run_device(self.cfg.device)  # every model this run opens goes there

    @property
    def world(self):  # -> arcforge.world.World
        if self._world is None:
            from arcforge.stages import prepare_world

            self._world = prepare_world(self)
        return self._world

    @property
    def tokenizer(self):  # -> PreTrainedTokenizerFast
        if self._tokenizer is None:
            from arcforge.stages import prepare_tokenizer

            self._tokenizer = prepare_tokenizer(self)
        return self._tokenizer

    def stage_dir(self, name: str) -> Path:
        return self.run_dir / name

    def checkpoint(self, name: str) -> Path:
        return self.run_dir / name / "checkpoint"

    def init_checkpoint(self, stage: StageCfg) -> Path | None:
        """The checkpoint a stage starts from: `init`, else the previous stage, else none."""
        names = [s.name for s in self.cfg.stages]
        i = names.index(stage.name)
        src = stage.init or (names[i - 1] if i > 0 else None)
        if src is None:
            return None
        ck = self.checkpoint(src)
        if not (ck / "config.json").exists():
            raise UserError(
                f"stage {stage.name!r} starts from {src!r}, which has no checkpoint yet"
            )
        return ck


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
    from arcforge.train.loop import MetricsLog

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
    runner = STAGE_RUNNERS.get(stage.kind)
    if runner is None:
        raise UserError(f"stage kind {stage.kind!r} has no runner; known: {sorted(STAGE_RUNNERS)}")
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
    """Run every stage (up to and including `until`), evaluate each checkpoint, write the report."""
    import arcforge.stages  # noqa: F401  (registers the stage runners)
    from arcforge.data.sources import register_run_dir
    from arcforge.eval.harness import evaluate_run
    from arcforge.report import write_report

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
