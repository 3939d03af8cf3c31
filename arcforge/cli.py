"""The `arcforge` command line: one entry point, one small function per subcommand.

    arcforge run [CONFIG] [a.b=value ...] [--run-dir DIR]   the whole pipeline (default: demo)
    arcforge run CONFIG --until STAGE                        the pipeline up to that stage
    arcforge world [CONFIG] --out DIR                        export the world's suites and texts
    arcforge eval CHECKPOINT|RUN_DIR [--suites ...]          the capability matrix
    arcforge eval judge PROJECT_DIR --base-url URL --model M agent-as-a-judge of a web app
    arcforge eval contamination RUN_DIR|WORLD_DIR|CONFIG     held-out items in training text
    arcforge report RUN_DIR                                  regenerate report.md/html/json
    arcforge chat CHECKPOINT                                 interactive chat (thinking, tools)
    arcforge serve CHECKPOINT                                OpenAI-compatible completions API

User mistakes (missing file, unknown key, wrong type) print one line and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import typer
from typer.core import TyperGroup

from arcforge.cli_model import model_app
from arcforge.cli_synth import register as _register_core_synth
from arcforge.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="arcforge: train agentic LLMs end to end, from a tiny CPU world to real checkpoints.",
)

ConfigArg = typer.Argument(
    None, help="YAML run config (default: configs/demo.yaml), then a.b=value overrides."
)
RunDirOpt = typer.Option(None, "--run-dir", help="Where the run's files go (default: runs/<name>).")


def _split(args: list[str] | None) -> tuple[str | None, list[str]]:
    """First argument is the config unless it looks like an override."""
    args = list(args or [])
    if args and "=" not in args[0]:
        return args[0], args[1:]
    return None, args


def _load(args: list[str] | None):
    from arcforge.run_config import load_config

    path, overrides = _split(args)
    return load_config(path, overrides)


def _run_until(args: list[str] | None, run_dir: Path | None, until: str | None) -> None:
    """Run the pipeline up to and including `until`: a stage name, else the first stage of
    that kind (`sft`, `agentic_rl` or `agentic-rl`); None runs every stage."""
    from arcforge.pipeline import default_run_dir, run_pipeline

    cfg = _load(args)
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


@app.command()
def run(
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


def _until_alias(kind: str):
    def alias(args: list[str] = ConfigArg, run_dir: Path = RunDirOpt) -> None:
        _run_until(args, run_dir, kind)

    alias.__doc__ = f"`arcforge run --until {kind}` (kept as a command of its own)."
    return alias


# the pipeline up to a stage kind, from before `run --until`; hidden from --help
for _kind in ("pretrain", "midtrain", "sft", "rl", "agentic_rl", "general_rl", "distill"):
    app.command(_kind.replace("_", "-"), hidden=True)(_until_alias(_kind))


@app.command("train-rm")
def train_rm(
    checkpoint: Path = typer.Argument(..., help="Causal-LM checkpoint the reward model starts at."),
    out: Path = typer.Option(..., "--out", help="Reward model directory to write."),
    source: list[str] = typer.Option(
        ["world:preferences"],
        "--source",
        help="Preference pairs: world:preferences or jsonl:<file> of {prompt, chosen, rejected}.",
    ),
    heldout: str = typer.Option("world:preferences:test", help="Held-out pairs ('' for none)."),
    config: Path = typer.Option(None, help="Run config whose world resolves world: sources."),
    steps: int = typer.Option(150),
    batch_size: int = typer.Option(16),
    lr: float = typer.Option(5e-4),
    max_len: int = typer.Option(256, help="Tokens kept per prompt + reply (the end is kept)."),
    seed: int = typer.Option(0),
) -> None:
    """Train an outcome reward model (scalar head, Bradley-Terry loss) on preference pairs."""
    import json

    from pydantic import ValidationError

    from arcforge.train.reward_model import RewardModelCfg, train_rm_from_checkpoint

    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    try:
        cfg = RewardModelCfg(
            sources=[{"source": s} for s in source],
            heldout=heldout or None,
            steps=steps,
            batch_size=batch_size,
            max_len=max_len,
            seed=seed,
            optim={"lr": lr, "warmup_steps": min(10, steps // 5), "weight_decay": 0.0},
        )
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"train-rm: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    specs = [s.source for s in cfg.sources] + [heldout or ""]
    if any(s.startswith("world:") for s in specs):
        from arcforge.data.sources import register_world_resolver
        from arcforge.run_config import load_config
        from arcforge.stages import build_world_from_cfg, world_records

        w = build_world_from_cfg(load_config(config))
        register_world_resolver(lambda suite, split: world_records(w, suite, split))
    summary = train_rm_from_checkpoint(checkpoint, cfg, out)
    typer.echo(json.dumps({"out": str(out), **summary}, default=float))


@app.command()
def world(
    args: list[str] = ConfigArg,
    out: Path = typer.Option(Path("runs/world"), "--out", help="Directory to write."),
) -> None:
    """Generate the embedded world (corpus, task pools, SFT demos), print its sizes, and write it
    as files to audit: DIR/suites/<suite>/{train,test}.jsonl (id, prompt, reference),
    DIR/text/<source>.jsonl (every text the config's training stages read) and the config."""
    from arcforge.audit.contamination import eval_counts
    from arcforge.audit.export import export_world
    from arcforge.run_config import dump_config
    from arcforge.stages import build_world_from_cfg

    cfg = _load(args)
    w = build_world_from_cfg(cfg)
    w.save(out)
    docs = w.corpus()
    typer.echo(
        f"world written to {out}: {len(docs)} corpus docs, "
        f"{sum(len(d.text) for d in docs) / 1e6:.2f} MB text, {len(w.sft_demos())} demos"
    )
    summary = export_world(w, out, cfg.stages, counts=eval_counts(cfg.eval))
    (out / "run_config.yaml").write_text(dump_config(cfg))  # what `eval contamination` reads
    for s, n in summary["suites"].items():
        typer.echo(f"  suite {s}: {n['train']} train / {n['test']} test  -> {out}/suites/{s}/")
    for m in summary["text"].values():
        note = f"  (not read: {m['missing']})" if m["missing"] else ""
        typer.echo(f"  text {m['file']}: {m['texts']} texts, {m['chars'] / 1e6:.2f} MB{note}")


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
app.add_typer(eval_app, name="eval")


@eval_app.command("matrix")
def eval_(
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
    import json

    from arcforge.eval.harness import check_suites, evaluate_checkpoint, evaluate_run
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
        from arcforge.stages.common import resolve_model_path

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
        typer.echo(f"report: {write_report(target)}")
        return
    if not (target / "config.json").exists():
        raise UserError(
            f"{target} is neither a checkpoint directory (no config.json) "
            "nor a run directory (no config.yaml)"
        )
    base = _read_results(against) if against else None
    cfg = load_config(config)
    from arcforge.device import set_run_device
    from arcforge.stages import build_world_from_cfg

    set_run_device(cfg.device)
    from arcforge.eval.harness import is_external

    # external benchmarks need no world: build it only for the world's own suites
    world_needed = any(not is_external(n) for n in (names or cfg.eval.suites))
    world = build_world_from_cfg(cfg) if world_needed else None
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
    import json

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
    import json

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


@app.command()
def report(run_dir: Path = typer.Argument(..., help="The run directory.")) -> None:
    """Regenerate report.md, report.html, report.json and plots from a run's files."""
    from arcforge.report import write_report

    typer.echo(f"report: {write_report(run_dir)}")


@app.command()
def chat(
    checkpoint: Path = typer.Argument(..., help="A checkpoint dir."),
    think: bool = typer.Option(True, help="Thinking on for each turn."),
    tools: bool = typer.Option(False, help="Offer and execute the world's tools."),
    config: Path = typer.Option(None, help="Run config whose world provides the tools."),
    max_new_tokens: int = typer.Option(256),
) -> None:
    """Chat with a checkpoint in the terminal; thinking blocks and tool calls are shown."""
    from arcforge.chatui import chat_loop

    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    offered = None
    if tools:
        from arcforge.run_config import load_config
        from arcforge.stages import build_world_from_cfg

        offered = build_world_from_cfg(load_config(config)).tools()
    chat_loop(checkpoint, think=think, max_new_tokens=max_new_tokens, tools=offered)


@app.command()
def serve(
    checkpoint: Path = typer.Argument(..., help="A checkpoint dir."),
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8000),
    precision: str = typer.Option("fp32", help="fp32, bf16 or int8 (simulated)."),
    device: str = typer.Option("cpu", help="cpu, cuda, cuda:N, mps or auto."),
) -> None:
    """Serve a checkpoint: OpenAI-compatible /v1/completions (token ids) and /v1/chat/completions."""
    from arcforge.device import set_run_device
    from arcforge.rollout.serve import serve as _serve

    set_run_device(device)
    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    if precision not in ("fp32", "bf16", "int8"):
        raise UserError(f"--precision must be fp32, bf16 or int8, got {precision!r}")
    _serve(checkpoint, host=host, port=port, precision=precision)


def _quiet_transformers() -> None:
    # our own progress bars cover long work; transformers' per-load bars are noise here
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


env_app = typer.Typer(no_args_is_help=True, help="Environments: check tasks and their verifiers.")
app.add_typer(env_app, name="env")


@env_app.command("check")
def env_check(
    task: Path = typer.Argument(
        ...,
        help="A Terminal-Bench/Harbor task dir, a Task JSON(L) file, "
        "or a SWE-bench record with repo_path.",
    ),
    solution: Path = typer.Option(
        None, help="Shell script (terminal) or patch (SWE) to run; default: the task's own oracle."
    ),
    empty: bool = typer.Option(False, "--empty", help="Run no solution (the verifier must fail)."),
    backend: str = typer.Option("bwrap", help="Sandbox backend: bwrap, docker or local."),
    container: bool = typer.Option(
        None,
        "--container/--no-container",
        help="Run a task directory as a container-like root built from its Dockerfile (uid 0, "
        "/app, writable /etc, /usr/local, /root); default: when the task has a Dockerfile.",
    ),
    root: str = typer.Option(
        None,
        help="How a container task gets its root: layer (over the host's /usr), rootfs (a real "
        "Debian root per image) or auto (the layer when it builds, else a real root); "
        "default: $ARCFORGE_TASK_ROOT or auto.",
    ),
) -> None:
    """Run a task's oracle (or a given solution, or none) in the sandbox and print the verdict.

    Exit status: 0 when the reward is 1, 1 when it is below 1, 3 when the task cannot run here
    (every blocker is listed on stderr with its remedy); 2 for a mistake in the arguments.
    """
    import json
    import os

    from arcforge.envs.blockers import remedy
    from arcforge.envs.check import check_task
    from arcforge.envs.importers import ROOT_MODES

    if not task.exists():
        raise UserError(f"task not found: {task}")
    if solution is not None and not solution.is_file():
        raise UserError(f"solution file not found: {solution}")
    if root is not None:
        if root not in ROOT_MODES:
            raise UserError(f"--root must be one of {', '.join(ROOT_MODES)}, got {root!r}")
        os.environ["ARCFORGE_TASK_ROOT"] = root
    try:
        res = check_task(
            task,
            solution=str(solution) if solution else None,
            empty=empty,
            backend=backend,
            container=container,
        )
    except ValueError as err:
        raise UserError(f"{task}: {str(err).replace('use empty=True', 'use --empty')}") from None
    typer.echo(json.dumps(res, indent=1, default=str))
    blockers = list(res["details"].get("unsupported") or [])
    if str(res["details"].get("error", "")).startswith("sandbox:"):
        blockers.append(res["details"]["error"])
    if blockers:
        typer.echo(f"unsupported: {len(blockers)} blocker(s)", err=True)
        for reason in blockers:
            typer.echo(f"- {reason}\n  remedy: {remedy(reason)}", err=True)
        raise typer.Exit(3)
    raise typer.Exit(0 if res["reward"] >= 1.0 else 1)


@env_app.command("serve")
def env_serve(
    kinds: str = typer.Option(..., help="Comma-separated task kinds to serve, e.g. swe,terminal."),
    config: Path = typer.Option(None, help="Run config whose world provides the environments."),
    host: str = typer.Option("0.0.0.0"),
    port: int = typer.Option(8100),
    max_concurrency: int = typer.Option(16, help="Episodes open at once."),
    name: str = typer.Option("", help="Service name (default: the kinds)."),
) -> None:
    """Serve environments over HTTP for agentic RL rollout workers (JSON protocol)."""
    from arcforge.envs.registry import FACTORIES, env_factory
    from arcforge.rollout.envservice import EnvHost, serve_env_host
    from arcforge.run_config import load_config
    from arcforge.stages import build_world_from_cfg

    wanted = [k for k in kinds.split(",") if k]
    bad = [k for k in wanted if k not in FACTORIES]
    if not wanted or bad:
        raise UserError(f"--kinds: unknown kind(s) {bad or wanted}; known: {sorted(FACTORIES)}")
    if max_concurrency < 1:
        raise UserError(f"--max-concurrency must be >= 1, got {max_concurrency}")
    world = build_world_from_cfg(load_config(config))
    env_host = EnvHost(env_factory(world), wanted, max_concurrency, name or "+".join(wanted))
    serve_env_host(env_host, host, port)


@env_app.command("serve-mcp")
def env_serve_mcp(
    tasks: Path = typer.Argument(..., help="Task JSONL holding ABE tasks (context['abe'])."),
    task: str = typer.Option(None, "--task", help="The task id; default: the first ABE task."),
) -> None:
    """Serve one ABE task's synthesized tools as an MCP server on stdin/stdout.

    Any MCP client can list and call the tools; they answer from the task's records exactly as
    the abe environment does. Needs the `mcp` extra.

    Examples:
        arcforge env serve-mcp abe_tasks.jsonl --task abe-0003
        # as an MCP environment's server: {"command": ["arcforge", "env", "serve-mcp", "abe.jsonl"]}
    """
    try:
        from arcforge.envs.mcp_env import abe_spec_of, serve_abe_stdio
    except ImportError as err:  # pragma: no cover - depends on the install
        raise UserError(
            f"serve-mcp needs the `mcp` extra (pip install 'arcforge[mcp]'): {err}"
        ) from None
    try:
        spec = abe_spec_of(tasks, task)
    except ValueError as err:
        raise UserError(str(err)) from None
    serve_abe_stdio(spec)


synth_app = typer.Typer(no_args_is_help=True, help="Data synthesis.")
app.add_typer(synth_app, name="synth")
_register_core_synth(synth_app)  # check-task, swe, terminal, export (arcforge/cli_synth.py)
app.add_typer(model_app, name="model")  # import real checkpoints (arcforge/cli_model.py)


@synth_app.command("rejection")
def synth_rejection(
    checkpoint: Path = typer.Argument(..., help="The checkpoint to sample from."),
    out: Path = typer.Option(..., "--out", help="SFT JSONL to write."),
    source: str = typer.Option("world:reasoning", help="Prompt source (tasks with answers)."),
    config: Path = typer.Option(None, help="Run config whose world resolves world: sources."),
    k: int = typer.Option(8, help="Samples per problem."),
    lo: float = typer.Option(0.1, help="Lowest pass rate kept (harder dropped as unsolved)."),
    hi: float = typer.Option(0.9, help="Highest pass rate kept (easier dropped as too easy)."),
    limit: int = typer.Option(200, help="Problems to try."),
    keep_per_problem: int = typer.Option(1),
    max_new_tokens: int = typer.Option(96),
    temperature: float = typer.Option(1.0),
    seed: int = typer.Option(0),
) -> None:
    """Rejection sampling for SFT: keep verified replies of problems inside the pass-rate band."""
    import json

    from arcforge.config import SourceCfg
    from arcforge.data.sources import register_world_resolver
    from arcforge.run_config import load_config
    from arcforge.stages import build_world_from_cfg, world_records
    from arcforge.stages.rl import load_prompt_records
    from arcforge.synth.rejection import rejection_sample

    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    w = build_world_from_cfg(load_config(config))
    register_world_resolver(lambda suite, split: world_records(w, suite, split))
    recs = load_prompt_records([SourceCfg(source=source)], seed, "synth")[:limit]
    tasks = [r.task for r in recs if r.task]
    if not tasks:
        raise UserError(f"source {source!r} gave no task with a reference answer")
    res = rejection_sample(
        checkpoint,
        tasks,
        k,
        out,
        band=(lo, hi),
        keep_per_problem=keep_per_problem,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    typer.echo(json.dumps(res.counts))


LLMUrlOpt = typer.Option(None, "--llm-url", help="OpenAI-compatible endpoint (arcforge serve).")
LLMModelOpt = typer.Option("default", "--llm-model", help="Model name sent to the endpoint.")
LLMKeyOpt = typer.Option("OPENAI_API_KEY", "--llm-key-env", help="Env variable with the API key.")
WorldCfgOpt = typer.Option(None, "--config", help="Run config whose world is the input.")


def _synth_world(config: Path | None):
    from arcforge.run_config import load_config
    from arcforge.stages import build_world_from_cfg

    return build_world_from_cfg(load_config(config))


@synth_app.command("search")
def synth_search(
    out: Path = typer.Option(..., "--out", help="Output dir (tasks, wkg, summary)."),
    config: Path = WorldCfgOpt,
    pages: Path = typer.Option(None, help="Pages JSONL ({id, title, text}) instead of the world."),
    n: int = typer.Option(20, help="Search tasks wanted."),
    attempts: int = typer.Option(2000, help="Path drafts sampled at most."),
    hops: str = typer.Option("3,4", help="Comma-separated hop counts."),
    paraphrase: bool = typer.Option(False, help="LLM paraphrase of template questions."),
    llm_pages: int = typer.Option(0, help="Free-text pages sent to the LLM extractor (-1: all)."),
    checkpoint: Path = typer.Option(
        None,
        help="A local checkpoint run as a search agent: questions it answers within 2 "
        "searches are dropped (the model-based 2-search filter).",
    ),
    seed: int = typer.Option(0),
    llm_url: str = LLMUrlOpt,
    llm_model: str = LLMModelOpt,
    llm_key_env: str = LLMKeyOpt,
) -> None:
    """Multi-hop search tasks from a web knowledge graph, filtered by difficulty and uniqueness."""
    import json

    from arcforge.synth.knowledge import load_pages, make_client, run_search
    from arcforge.synth.search import SearchSynthConfig

    try:
        hop_list = tuple(int(h) for h in hops.split(","))
    except ValueError:
        raise UserError(f"--hops must be comma-separated integers, got {hops!r}") from None
    cfg = SearchSynthConfig(n=n, attempts=attempts, hops=hop_list, paraphrase=paraphrase, seed=seed)
    client = make_client(llm_url, llm_model, llm_key_env)
    src = {"pages": load_pages(pages)} if pages else {"world": _synth_world(config)}
    cap = None if llm_pages < 0 else llm_pages
    engine = None
    if checkpoint is not None:
        from arcforge.eval.harness import load_engine

        _, tok, local = load_engine(checkpoint)
        engine = (local, tok)
    summary = run_search(out, cfg=cfg, client=client, llm_pages=cap, engine=engine, **src)
    typer.echo(json.dumps({"kept": summary["kept"], "hops": summary["hops"]}))


@synth_app.command("abe")
def synth_abe(
    out: Path = typer.Option(..., "--out", help="Output directory (tasks.jsonl, summary.json)."),
    config: Path = WorldCfgOpt,
    descriptions: Path = typer.Option(None, help="Task descriptions (LLM route), not the world."),
    n: int = typer.Option(20, help="Tool environments wanted."),
    ops: str = typer.Option(
        "generalize,add_parameters,generalize_types,distractors",
        help="Complexity-scaling ops (each applied with p=0.5).",
    ),
    seed: int = typer.Option(0),
    llm_url: str = LLMUrlOpt,
    llm_model: str = LLMModelOpt,
    llm_key_env: str = LLMKeyOpt,
) -> None:
    """ABE tool environments (four scenarios) deployed as local functions: Task(kind="abe")."""
    import json

    from arcforge.synth.knowledge import load_descriptions, make_client, run_abe

    client = make_client(llm_url, llm_model, llm_key_env)
    descs = load_descriptions(descriptions) if descriptions else None
    world = None if descs is not None else _synth_world(config)
    op_list = tuple(o for o in ops.split(",") if o)
    summary = run_abe(out, n, seed, world, descs, client, op_list)
    typer.echo(json.dumps({"kept": summary["kept"], "scenarios": summary["scenarios"]}))


@synth_app.command("gem")
def synth_gem(
    out: Path = typer.Option(..., "--out", help="Output directory (sft.jsonl, summary.json)."),
    config: Path = WorldCfgOpt,
    texts: Path = typer.Option(None, help="JSONL with 'text', a .txt/.md file or a directory."),
    limit: int = typer.Option(None, help="Texts to read at most."),
    refine: bool = typer.Option(True, help="Refine the trajectories."),
    llm_url: str = LLMUrlOpt,
    llm_model: str = LLMModelOpt,
    llm_key_env: str = LLMKeyOpt,
) -> None:
    """GEM: tool-use trajectories (SFT records) from texts that describe procedures."""
    import json

    from arcforge.synth.knowledge import load_texts, make_client, run_gem, world_texts

    client = make_client(llm_url, llm_model, llm_key_env)
    items = load_texts(texts) if texts else world_texts(_synth_world(config))
    summary = run_gem(out, items, client, refine, limit)
    dropped = {k: v["dropped"] for k, v in summary["steps"].items() if v["dropped"]}
    typer.echo(json.dumps({"kept": summary["kept"], "dropped": dropped}))


@eval_app.command("contamination")
def eval_contamination(
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
    import json

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
        from arcforge.stages import build_world_from_cfg
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
            w = build_world_from_cfg(cfg)
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
def eval_judge(
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
    import json

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


# the hyphenated names from before `eval` had subcommands; hidden from --help
app.command("eval-contamination", hidden=True)(eval_contamination)
app.command("eval-judge", hidden=True)(eval_judge)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] not in ("--help", "-h"):
        _quiet_transformers()
    try:
        app()
    except UserError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun the same command to resume", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
