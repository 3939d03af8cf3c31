"""`arcforge chat` (a checkpoint in the terminal, thinking and tool calls shown) and
`arcforge serve` (a checkpoint behind an OpenAI-compatible API).

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from arcforge.cli.shared import setup_world
from arcforge.errors import UserError


def chat_cmd(
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
        offered = setup_world(config).tools()
    chat_loop(checkpoint, think=think, max_new_tokens=max_new_tokens, tools=offered)


def serve_cmd(
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
