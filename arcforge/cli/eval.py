"""`arcforge eval`: the capability matrix (the default subcommand), the contamination check and
agent-as-a-judge.

    arcforge eval CHECKPOINT|RUN_DIR [--suites ...]          the capability matrix
    arcforge eval --endpoint URL --model M --suites ...      external suites against a server
    arcforge eval contamination RUN_DIR|WORLD_DIR|CONFIG     held-out items in training text
    arcforge eval judge PROJECT_DIR --base-url URL --model M agent-as-a-judge of a web app

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import typer
from typer.core import TyperGroup

from arcforge.cli.shared import setup_world
from arcforge.errors import UserError


class _EvalGroup(TyperGroup):
    """`arcforge eval TARGET ...` is `arcforge eval matrix TARGET ...`: arguments that do not
    start with a subcommand's name go to the default one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["matrix", *args]
        return super().parse_args(ctx, args)


eval_app = typer.Typer(
    cls=_EvalGroup,
    no_args_is_help=True,
    help="Evaluate checkpoints: the capability matrix (the default subcommand), "
    "contamination, agent-as-a-judge.\n\n"
    "Examples:\n\n"
    "    arcforge eval runs/smoke    # every stage of a run, then its report\n\n"
    "    arcforge eval runs/smoke/sft/checkpoint --suites reasoning,chat\n\n"
    "    arcforge eval CKPT --suites 'bfcl:simple_python,reasoning_gym:leg_counting?n=200'\n\n"
    "    arcforge eval --endpoint http://localhost:8000/v1 --model M --suites bfcl:multiple\n\n"
    "    arcforge eval contamination runs/smoke\n\n"
    "    arcforge eval judge PROJECT_DIR --base-url URL --model M",
)


@eval_app.command("matrix")
def matrix_cmd(
    target: Path = typer.Argument(
        None, help="A checkpoint dir or a run dir (none with --endpoint)."
    ),
    suites: str = typer.Option("", help="Comma-separated suites (default: the config's)."),
    config: Path = typer.Option(None, help="Run config for the world and eval settings."),
    episodes: Path = typer.Option(
        None,
        help="Checkpoint target: write every agent-suite episode to DIR/<suite>.jsonl "
        "(a run dir always writes them to RUN/eval/<stage>/).",
    ),
    out: Path = typer.Option(
        None, help="Checkpoint target: write the full results (per-item scores too) as JSON."
    ),
    against: Path = typer.Option(
        None,
        help="Checkpoint target: an --out file of another checkpoint; prints each shared "
        "suite's paired change to this one, with its 95% interval.",
    ),
    endpoint: str = typer.Option(
        None,
        help="Score an OpenAI-compatible server (vLLM, SGLang, `arcforge serve`) instead of a "
        "checkpoint: its base URL, e.g. http://localhost:8000/v1; external suites only.",
    ),
    model: str = typer.Option("default", help="With --endpoint: the model name to request."),
    max_tokens: int = typer.Option(512, help="With --endpoint: the longest reply."),
) -> None:
    """Evaluate a checkpoint (or every stage of a run) on the held-out suites (the default
    subcommand: `arcforge eval TARGET` runs it).

    Agent suites also count each episode's first failing step (solved, parse_error,
    tool_error, env_error, wrong_answer, max_turns, context, length)."""
    from arcforge.audit.checks import run_audits
    from arcforge.device import set_run_device
    from arcforge.eval.harness import check_suites, evaluate_checkpoint, evaluate_run, is_external
    from arcforge.pipeline import RunContext
    from arcforge.report import write_report
    from arcforge.run_config import load_config

    names = [s for s in suites.split(",") if s] or None
    check_suites(names or [])  # before any world is built
    if endpoint:
        _eval_endpoint(endpoint, model, max_tokens, names or [], out, against)
        return
    if target is None:
        raise UserError("give a checkpoint or run directory, or --endpoint URL")
    if not target.exists():  # a registered real checkpoint's name (imported on first use)
        from arcforge.stages.context import resolve_model_path

        target = Path(resolve_model_path(str(target)))
    if (target / "config.yaml").exists() and not (target / "config.json").exists():
        if out or against:
            raise UserError(
                "--out and --against take a checkpoint target; a run's results are in "
                f"{target}/eval/<stage>.json and its report compares the stages"
            )
        cfg = load_config(config or target / "config.yaml")
        if names:
            cfg.eval.suites = names
        evaluate_run(RunContext(cfg, target))
        run_audits(target)
        typer.echo(f"report: {write_report(target)}")
        return
    if not (target / "config.json").exists():
        raise UserError(
            f"{target} is neither a checkpoint directory (no config.json) "
            "nor a run directory (no config.yaml)"
        )
    base = _read_results(against) if against else None
    cfg = load_config(config)
    set_run_device(cfg.device)
    # external benchmarks need no world: build it only for the world's own suites
    world_needed = any(not is_external(n) for n in (names or cfg.eval.suites))
    world = setup_world(cfg) if world_needed else None
    res = evaluate_checkpoint(target, world, cfg.eval, names, episodes_dir=episodes)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1, default=str))
    keys = ("score", "ci", "n", "outcomes", "by_hops")
    typer.echo(
        json.dumps({k: {kk: v[kk] for kk in keys if kk in v} for k, v in res.items()}, indent=1)
    )
    if base is not None:
        _print_changes(base, res, against)


def _eval_endpoint(
    url: str, model: str, max_tokens: int, names: list[str], out: Path | None, against
) -> None:
    """External suites against an OpenAI-compatible endpoint."""
    from arcforge.eval.external.endpoint import EndpointResponder
    from arcforge.eval.harness import is_external, run_external

    world = [n for n in names if not is_external(n)]
    if world or not names:
        raise UserError(
            f"--endpoint scores external suites (bfcl:..., tasks:..., ...); got {world or 'none'}"
        )
    base = _read_results(against) if against else None
    responder = EndpointResponder(url, model, temperature=0.0, max_tokens=max_tokens)
    res = {n: run_external(n, responder, max_tokens)[0] for n in names}
    for r in res.values():
        r["endpoint"] = {"url": url, "model": model}
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1, default=str))
    keys = ("score", "ci", "n", "baselines")
    typer.echo(
        json.dumps({k: {kk: v[kk] for kk in keys if kk in v} for k, v in res.items()}, indent=1)
    )
    if base is not None:
        _print_changes(base, res, against)


def _read_results(path: Path) -> dict[str, dict]:
    """An `arcforge eval --out` file: {suite: {"score", "ci", "scores", ...}}."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"--against {path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) and "score" in v and "ci" in v for v in data.values()
    ):
        raise UserError(f"--against {path}: not an `arcforge eval --out` results file")
    return data


def _print_changes(base: dict[str, dict], res: dict[str, dict], base_path: Path) -> None:
    """Per shared suite, the paired change from `base` to `res` (report.paired_change)."""
    from arcforge.report import paired_change

    shared = [s for s in res if s in base]
    if not shared:
        typer.echo(f"no suite in common with {base_path}")
        return
    typer.echo(f"change from {base_path}:")
    for s in shared:
        c = paired_change(s, base[s], res[s])
        ci = c["delta_ci"]
        span = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]{'ᶜ' if c['clustered'] else ''}" if ci else "unpaired"
        if ci is None and base[s].get("scores") and res[s].get("scores"):  # unequal lengths
            span += " (different items: compare with the same eval.n)"
        verdict = "beyond 95% CI" if c["beyond_ci"] else "within 95% CI"
        typer.echo(
            f"  {s}: {base[s]['score']:.3f} -> {res[s]['score']:.3f}  "
            f"delta {c['delta']:+.3f} {span}  {verdict}"
        )


@eval_app.command("contamination")
def contamination_cmd(
    target: Path = typer.Argument(
        ..., help="A run dir, a saved world dir (`arcforge world --out`) or a run config YAML."
    ),
    config: Path = typer.Option(
        None,
        help="World dir or YAML target: the run config whose stages train (default: the world "
        "dir's run_config.yaml, else demo).",
    ),
    baselines: bool = typer.Option(True, help="Also measure the majority / nearest baselines."),
    refresh: bool = typer.Option(False, help="Run dir: measure again, not from the cache."),
    out: Path = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    """Contamination check: per suite, held-out references
    with at least half of their 13-token windows in training text, and duplicated prompts;
    with the trivial baselines. A run dir caches both under RUN_DIR/checks/."""
    from arcforge.audit.baselines import run_baselines, world_baselines
    from arcforge.audit.contamination import (
        check_world,
        eval_counts,
        format_table,
        run_contamination,
    )
    from arcforge.run_config import load_config

    if not target.exists():
        raise UserError(f"{target}: no such run dir, world dir or config file")
    if (target / "config.yaml").exists():
        if not (target / "world" / "DONE").exists():
            raise UserError(f"{target} has no saved world yet (run at least its world step)")
        cont = run_contamination(target, refresh)
        base = run_baselines(target, refresh) if baselines else None
    else:
        from arcforge.world import World

        if target.is_dir():
            if not (target / "config.json").exists():
                raise UserError(
                    f"{target} is neither a run dir (config.yaml) nor a saved world (config.json)"
                )
            saved = target / "run_config.yaml"  # written by `arcforge world --out`
            cfg = load_config(config or (saved if saved.exists() else None))
            w = World.load(target)
        else:
            cfg = load_config(config or target)
            w = setup_world(cfg)
        counts = eval_counts(cfg.eval)
        cont = check_world(w, cfg.stages, None, counts)
        base = world_baselines(w, counts) if baselines else None
    assert cont is not None
    typer.echo(format_table(cont))
    for src, m in cont["training_sources"].items():
        if m["missing"]:
            typer.echo(f"note: {src} not read: {m['missing']}")
    if base:
        typer.echo("baselines (majority / nearest train):")
        for s, r in base["suites"].items():
            how = ", executed" if r["executed"] else ""
            typer.echo(f"  {s:<13} {r['majority']:.3f} / {r['nearest']:.3f}  (n={r['n']}{how})")
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"contamination": cont, "baselines": base}, indent=1))


@eval_app.command("judge")
def judge_cmd(
    projects: list[Path] = typer.Argument(..., help="Front-end project directories."),
    checks: Path = typer.Option(None, help="checks.json (default: each project's own)."),
    base_url: str = typer.Option(..., "--base-url", help="OpenAI-compatible judge endpoint."),
    model: str = typer.Option(..., "--model", help="Judge model name."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Env variable with the API key."),
    out: Path = typer.Option(Path("runs/judge"), help="Screenshots and judge.json go here."),
    max_turns: int = typer.Option(12, help="Judge turns per check item."),
    native_tools: bool = typer.Option(False, help="Send tool schemas as OpenAI `tools`."),
) -> None:
    """Agent-as-a-judge: build, start and check each project's items in Chromium."""
    from arcforge.eval.judge import judge_projects
    from arcforge.llm import LLMClient

    client = LLMClient(base_url, model, api_key_env=api_key_env)
    reports, bsr = judge_projects(
        projects, client, checks, out, max_turns=max_turns, native_tools=native_tools
    )
    out.mkdir(parents=True, exist_ok=True)
    summary = {"bsr": bsr, "projects": [r.to_dict() for r in reports]}
    (out / "judge.json").write_text(json.dumps(summary, indent=1, default=str))
    for r in reports:
        for v in r.verdicts:
            typer.echo(f"{r.project} [{v.check_id}] {v.verdict}: {v.reason}")
    passed = sum(v.verdict == "PASS" for r in reports for v in r.verdicts)
    total = sum(len(r.verdicts) for r in reports)
    typer.echo(f"build success rate {bsr:.2f}; checks passed {passed}/{total}")
    typer.echo(f"report: {out / 'judge.json'}")
