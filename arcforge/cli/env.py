"""`arcforge env`: check a task's verifier in the sandbox, serve environments over HTTP for
rollout workers, serve an ABE task's tools over MCP.

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from arcforge.cli.shared import setup_world
from arcforge.errors import UserError

env_app = typer.Typer(no_args_is_help=True, help="Environments: check tasks and their verifiers.")


@env_app.command("check")
def check_cmd(
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
def serve_cmd(
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

    wanted = [k for k in kinds.split(",") if k]
    bad = [k for k in wanted if k not in FACTORIES]
    if not wanted or bad:
        raise UserError(f"--kinds: unknown kind(s) {bad or wanted}; known: {sorted(FACTORIES)}")
    if max_concurrency < 1:
        raise UserError(f"--max-concurrency must be >= 1, got {max_concurrency}")
    world = setup_world(config)
    env_host = EnvHost(env_factory(world), wanted, max_concurrency, name or "+".join(wanted))
    serve_env_host(env_host, host, port)


@env_app.command("serve-mcp")
def serve_mcp_cmd(
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
