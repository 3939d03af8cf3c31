"""`arcforge run` (the pipeline, optionally up to one stage, optionally under torchrun) and
`arcforge report` (a run's audits and report, again from its files).

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from arcforge.cli.shared import ConfigArg, RunDirOpt, load_run_config
from arcforge.errors import UserError


def _run_until(args: list[str] | None, run_dir: Path | None, until: str | None) -> None:
    """Run the pipeline up to and including `until`: a stage name, else the first stage of
    that kind (`sft`, `agentic_rl` or `agentic-rl`); None runs every stage."""
    from arcforge.pipeline import default_run_dir, run_pipeline

    cfg = load_run_config(args)
    names = [s.name for s in cfg.stages]
    if until is not None and until not in names:
        kind = until.replace("-", "_")
        match = [s.name for s in cfg.stages if s.kind == kind]
        if not match:
            raise UserError(f"--until {until}: no stage of that name or kind; stages: {names}")
        until = match[0]
    out = run_pipeline(cfg, run_dir or default_run_dir(cfg), until=until)
    typer.echo(f"report: {out / 'report.md'}  (also report.html, report.json, plots/)")


def _relaunch_under_torchrun(nproc: int) -> None:
    """Run this same command line as `nproc` processes of torchrun on this machine (each sees
    RANK/WORLD_SIZE/LOCAL_RANK, so it does not relaunch again) and exit with its status."""
    import os

    if nproc <= 1 or "LOCAL_RANK" in os.environ:
        return
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args
    from torch.distributed.run import run as torchrun

    argv, rest = [], iter(sys.argv[1:])
    for a in rest:  # without --nproc, which torchrun's own parser would claim
        if a == "--nproc":
            next(rest, None)
        elif not a.startswith("--nproc="):
            argv.append(a)
    try:
        launch = ["--standalone", f"--nproc-per-node={nproc}", "-m", "arcforge.cli", *argv]
        torchrun(parse_args(launch))
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        typer.echo(f"error: rank {rank} of {nproc} exited with {failure.exitcode}", err=True)
        raise typer.Exit(failure.exitcode if failure.exitcode > 0 else 1) from None
    raise typer.Exit(0)


def run_cmd(
    args: list[str] = ConfigArg,
    run_dir: Path = RunDirOpt,
    nproc: int = typer.Option(
        1, "--nproc", min=1, help="Processes on this machine, under torchrun (trainer: fsdp2)."
    ),
    until: str = typer.Option(
        None,
        "--until",
        metavar="STAGE",
        help="Stop after this stage (a stage name, or the first stage of that kind).",
    ),
) -> None:
    """Run the whole pipeline: world, tokenizer, every stage, evaluation, report.

    A rerun skips finished stages and resumes an interrupted one.

    Examples:

        arcforge run configs/smoke.yaml    # every stage, about two minutes

        arcforge run configs/demo.yaml --until sft    # up to the sft stage

        arcforge run configs/demo.yaml stages.sft.optim.lr=5e-4 --run-dir runs/x
    """
    _relaunch_under_torchrun(nproc)
    _run_until(args, run_dir, until)


def report_cmd(run_dir: Path = typer.Argument(..., help="The run directory.")) -> None:
    """Regenerate report.md, report.html, report.json and plots from a run's files."""
    from arcforge.audit.checks import run_audits
    from arcforge.report import write_report

    run_audits(run_dir)
    typer.echo(f"report: {write_report(run_dir)}")
