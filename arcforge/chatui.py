"""`arcforge chat CHECKPOINT`: talk to a checkpoint in the terminal.

Thinking blocks are shown dimmed, tool calls in yellow. With `--tools` the world's tools are
offered and actually executed, and their results fed back until the model answers (at most a
few rounds), so a user can watch a trained agent work. `/think` and `/nothink` switch thinking
for the next turns (the turn-level switch of the template); `/reset` clears history; `/quit`.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from arcforge.chat import ThinkingConfig, parse_assistant, render_ids, to_message
from arcforge.chat.formats import chat_format
from arcforge.chat.tokens import END, EOS
from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.types import Message, Tool


def _run_tool(tools: dict[str, Tool], name: str, args: dict) -> str:
    tool = tools.get(name)
    if tool is None or tool.fn is None:
        return f"error: unknown tool {name!r}; available: {sorted(tools)}"
    try:
        return str(tool.fn(**args))
    except Exception as err:  # a bad call is an observation for the model, not a crash
        return f"error: {type(err).__name__}: {err}"


def chat_loop(
    checkpoint: Path,
    think: bool = True,
    max_new_tokens: int = 256,
    tools: dict[str, Tool] | None = None,
    temperature: float = 0.7,
    max_tool_rounds: int = 4,
) -> None:
    con = Console()
    model = load_model(checkpoint).eval()
    tok, _ = load_tokenizer(checkpoint)
    engine = LocalEngine(model, pad_token_id=tok.pad_token_id or 0)
    fmt = chat_format(tok)
    stops = fmt.stop_ids()
    params = SamplingParams(
        max_new_tokens=max_new_tokens, temperature=temperature, stop_token_ids=stops
    )
    history: list[Message] = []
    con.print(f"[bold]arcforge chat[/] {checkpoint} — /think /nothink /reset /quit")
    while True:
        try:
            text = con.input("[bold green]you> [/]")
        except (EOFError, KeyboardInterrupt):
            return
        cmd = text.strip()
        if cmd in ("/quit", "/exit"):
            return
        if cmd in ("/think", "/nothink"):
            think = cmd == "/think"
            con.print(f"thinking {'on' if think else 'off'}")
            continue
        if cmd == "/reset":
            history = []
            continue
        history.append(Message(role="user", content=text, thinking=think))
        for _ in range(max_tool_rounds + 1):
            enc = render_ids(
                history,
                tok,
                tools=list((tools or {}).values()) or None,
                thinking=ThinkingConfig(),
                add_generation_prompt=True,
            )
            out = engine.generate([enc.input_ids], params)[0]
            if fmt.name == "arcforge":
                raw = tok.decode(out.token_ids).replace(END, "").replace(EOS, "")
                parsed = parse_assistant(raw)
            else:
                parsed = fmt.parse_ids(list(out.token_ids), list((tools or {}).values()))
            if parsed.reasoning:
                con.print(f"[dim]<think> {parsed.reasoning} </think>[/]")
            for c in parsed.tool_calls:
                con.print(f"[yellow]tool call: {c.name}({json.dumps(c.arguments)})[/]")
            for e in parsed.errors:
                con.print(f"[red]malformed output: {e}[/]")
            if parsed.content:
                con.print(f"[bold cyan]model>[/] {parsed.content}")
            msg = to_message(parsed)
            history.append(msg)
            if not (tools and parsed.tool_calls):
                break
            for c in parsed.tool_calls:
                result = _run_tool(tools, c.name, c.arguments)
                con.print(f"[magenta]tool result: {result}[/]")
                history.append(Message(role="tool", content=result, tool_call_id=c.id, name=c.name))
