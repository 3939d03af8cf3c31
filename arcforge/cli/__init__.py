"""The `arcforge` command line: one entry point, one small module per command group.

    arcforge run [CONFIG] [a.b=value ...] [--run-dir DIR]   the whole pipeline (default: demo)
    arcforge run CONFIG --until STAGE                        the pipeline up to that stage
    arcforge world [CONFIG] --out DIR                        export the world's suites and texts
    arcforge eval CHECKPOINT|RUN_DIR [--suites ...]          the capability matrix
    arcforge eval judge PROJECT_DIR --base-url URL --model M agent-as-a-judge of a web app
    arcforge eval contamination RUN_DIR|WORLD_DIR|CONFIG     held-out items in training text
    arcforge report RUN_DIR                                  audits, then report.md/html/json
    arcforge chat CHECKPOINT                                 interactive chat (thinking, tools)
    arcforge serve CHECKPOINT                                OpenAI-compatible completions API
    arcforge train-rm CHECKPOINT --out DIR                   an outcome reward model
    arcforge env check|serve|serve-mcp ...                   environments (cli/env.py)
    arcforge synth ...                                       data synthesis (cli/synth.py)
    arcforge model import|list ...                           real checkpoints (cli/model.py)

This module builds the typer app from the command modules (run, train, world, eval, chat, env,
synth, model); `shared` holds the config argument and the world set-up they share.
User mistakes (missing file, unknown key, wrong type) print one line and exit 2.
"""

from __future__ import annotations

import sys

import typer

from arcforge.cli.chat import chat_cmd, serve_cmd
from arcforge.cli.env import env_app
from arcforge.cli.eval import eval_app
from arcforge.cli.model import model_app
from arcforge.cli.run import report_cmd, run_cmd
from arcforge.cli.synth import synth_app
from arcforge.cli.train import train_rm_cmd
from arcforge.cli.world import world_cmd
from arcforge.errors import UserError

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="arcforge: train agentic LLMs end to end, from a tiny CPU world to real checkpoints.",
)
app.command("run")(run_cmd)
app.command("train-rm")(train_rm_cmd)
app.command("world")(world_cmd)
app.add_typer(eval_app, name="eval")
app.command("report")(report_cmd)
app.command("chat")(chat_cmd)
app.command("serve")(serve_cmd)
app.add_typer(env_app, name="env")
app.add_typer(synth_app, name="synth")
app.add_typer(model_app, name="model")


def _quiet_transformers() -> None:
    # our own progress bars cover long work; transformers' per-load bars are noise here
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def main() -> None:
    """The console script: run the app; a UserError is one line on stderr and exit status 2."""
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
