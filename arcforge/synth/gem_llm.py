"""GEM's LLM route (filter, extract, generate, refine through LLMClient) and the driver.

Each stage is one `ask_json` request with a fixed prompt; replies are checked before use (a
workflow needs steps, tools need OpenAI function shape, messages need known roles) and a text
whose reply is unusable is dropped as "bad_llm_reply" (the problem is in the journal). Tool calls may come in the
OpenAI shape ({"function": {"name", "arguments": "<json>"}}) or flat ({"name", "arguments"});
calls without ids get ids, and tool responses without `tool_call_id` are linked to the pending
calls in order. `synthesize_gem` runs either route over a list of texts as pipeline steps
(journals, provenance, resume; arcforge.synth.pipeline) and counts every step; LLM calls go
through `LLMGuard` (three endpoint failures in a row abort: an unreachable endpoint is an error,
not data).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from arcforge.llm import ask_json
from arcforge.synth.batches import LLMGuard, run_batches
from arcforge.synth.gem import (
    GemItem,
    extract_rules,
    generate_rules,
    is_procedure,
    refine_rules,
    schema_tools,
    validate_trajectory,
)
from arcforge.synth.pipeline import Drop, Record, Step
from arcforge.types import Message

FILTER_PROMPT = (
    "Does the text describe a procedure of several steps that someone carries out? "
    'Reply with JSON only: {"multi_step": true or false}'
)
EXTRACT_PROMPT = (
    "Extract the workflow the text describes and design the tools an assistant would need. "
    'Reply with JSON only: {"goal": "...", "workflow": ["step 1", ...], "tools": [OpenAI '
    'function schemas {"type": "function", "function": {"name", "description", "parameters"}}]}'
)
GENERATE_PROMPT = (
    "Write one realistic conversation in which an assistant completes the workflow with the "
    'tools. Reply with JSON only: {"messages": [{"role": "system" | "user" | "assistant" | '
    '"tool", "content": "...", "tool_calls": [{"id": "...", "name": "...", "arguments": {...}}], '
    '"tool_call_id": "..."}]}. Every tool call gets a tool message; the last message is the '
    "assistant's answer."
)
REFINE_PROMPT = (
    "Improve this tool-use conversation: vary the tool use (parallel calls where independent), "
    "make tool responses realistic (structured, with plausible details), and make the user "
    "request harder or more ambiguous. Keep only the given tools. Same JSON format: "
    '{"messages": [...]}'
)


def _ask(client: Any, system: str, payload: str) -> Any:
    return ask_json(
        client,
        [{"role": "system", "content": system}, {"role": "user", "content": payload}],
        max_tokens=2048,
    )


def parse_messages(raw: Any) -> list[Message]:
    """Messages from a model's {"messages": [...]} (or bare list), with call ids linked."""
    items = raw.get("messages") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise ValueError("expected a non-empty 'messages' list")
    msgs, pending, n = [], [], 0
    for i, d in enumerate(items):
        try:
            m = Message.from_dict(d)
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"messages[{i}]: {err}") from None
        for c in m.tool_calls:
            c.id = c.id or f"call-{n}"
            n += 1
            pending.append(c)
        if m.role == "tool" and not m.tool_call_id and pending:
            m.tool_call_id, m.name = pending[0].id, m.name or pending[0].name
        if m.role == "tool":
            pending = [c for c in pending if c.id != m.tool_call_id]
        msgs.append(m)
    return msgs


def filter_llm(item: GemItem, client: Any) -> bool:
    reply = _ask(client, FILTER_PROMPT, item.text)
    return bool(reply.get("multi_step")) if isinstance(reply, dict) else False


def extract_llm(item: GemItem, client: Any) -> bool:
    """Fill goal / steps / tools from the model; False when its reply is unusable."""
    reply = _ask(client, EXTRACT_PROMPT, item.text)
    if not isinstance(reply, dict) or not isinstance(reply.get("workflow"), list):
        return False
    tools = [
        t if "function" in t else {"type": "function", "function": t}
        for t in reply.get("tools") or []
        if isinstance(t, dict)
    ]
    try:
        schema_tools(tools)
    except ValueError:
        return False
    item.goal = str(reply.get("goal") or "")
    item.steps = [{"text": str(s)} for s in reply["workflow"]]
    item.tools = tools
    return len(item.steps) >= 2 and bool(tools)


def generate_llm(item: GemItem, client: Any) -> None:
    payload = json.dumps(
        {
            "text": item.text,
            "goal": item.goal,
            "workflow": [s["text"] for s in item.steps],
            "tools": item.tools,
        }
    )
    item.messages = parse_messages(_ask(client, GENERATE_PROMPT, payload))


def refine_llm(item: GemItem, client: Any) -> None:
    payload = json.dumps({"tools": item.tools, "messages": [m.to_dict() for m in item.messages]})
    item.messages = parse_messages(_ask(client, REFINE_PROMPT, payload))
    item.refinements.append("llm_refine")


def _steps(client: Any, refine: bool) -> list[Step]:
    """filter -> extract -> generate -> (refine) -> validate, on the LLM or the rule route."""
    llm, guard = client is not None, LLMGuard("GEM")

    def stage(name: str, run: Any, reason: str) -> Step:
        def fn(r: Record) -> Record:
            item = GemItem.from_dict(r.data)
            ok = guard(lambda: run(item)) if llm else run(item)
            if ok is False:  # a legitimate "no" (not a procedure, no workflow)
                raise Drop(reason)
            return Record(r.id, item.to_dict())

        return Step(name, fn, on_error="raise")

    def validate(r: Record) -> Record:
        item = GemItem.from_dict(r.data)
        problems = validate_trajectory(item.messages, item.tools)
        if problems:
            raise Drop("invalid_trajectory", "; ".join(problems))
        return r

    def keep(item: GemItem) -> bool:
        return filter_llm(item, client) if llm else is_procedure(item.text)

    steps = [
        stage("filter", keep, "not_procedure"),
        stage(
            "extract",
            lambda it: extract_llm(it, client) if llm else extract_rules(it),
            "no_workflow",
        ),
        stage(
            "generate",
            lambda it: generate_llm(it, client) if llm else generate_rules(it),
            "no_trajectory",
        ),
    ]
    if refine:
        steps.append(
            stage(
                "refine",
                lambda it: refine_llm(it, client) if llm else refine_rules(it),
                "no_trajectory",
            )
        )
    return [*steps, Step("validate", validate)]


def synthesize_gem(
    texts: list[tuple[str, str]],
    client: Any = None,
    refine: bool = True,
    limit: int | None = None,
    work_dir: Path | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """GEM over (id, text) pairs on the synthesis pipeline: the LLM route when `client` is
    given, else the rule route.

    Returns:
        (records, summary): SFT records ({"messages", "tools", ...}) and per-step counts.
    """
    todo = texts[:limit] if limit else texts
    route = "llm" if client is not None else "rule"

    def seeds(a: int, b: int) -> list[Record]:
        return [Record(tid, GemItem(tid, text, route=route).to_dict()) for tid, text in todo[a:b]]

    with tempfile.TemporaryDirectory() as tmp:
        kept, counts = run_batches(
            _steps(client, refine),
            Path(work_dir or tmp),
            seeds,
            len(todo),
            max(1, len(todo)),
            None,
            "gem",
        )
    records = []
    for r in kept:
        rec = GemItem.from_dict(r.data).record()
        rec["provenance"] = r.provenance
        records.append(rec)
    summary = {
        "in": len(todo),
        "kept": len(records),
        "steps": counts,
        "refinements": dict(Counter(x for r in records for x in r["refinements"])),
        "calls": sum(len(m.get("tool_calls", [])) for r in records for m in r["messages"]),
    }
    return records, summary
