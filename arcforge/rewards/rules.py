"""Rule-based rewards for chat / instruction replies: hard gates plus a constraint score.

The rules are the part of the general-RL reward that cannot be gamed (GLM-5's hybrid reward):
clear, explainable checks. They come in two kinds:

    gates  (all-or-nothing; a failed gate zeroes the whole hybrid reward)
        format     the reply parsed cleanly (no unclosed think block, no tool call in a chat
                   reply, no stray special tokens or think tags in the visible text), non-empty
        required   content the instruction explicitly asks for is there (`include`,
                   `starts_with`, `ends_with` constraints)
        forbidden  no word the instruction forbids (`exclude`) and no canned AI boilerplate
        json       when the task asks for JSON (a `json_keys` constraint or metadata
                   format="json"), the reply is one valid JSON value
    score  the fraction of the task's constraints satisfied (length limits, case, commas, exact
           JSON keys, ...), computed by `arcforge.world.tasks.constrained_chat.check_constraints`

`rule_reward` = 0 when a gate fails, else the constraint fraction (1.0 for a task without
constraints). Pure functions of the text; no model.

`tool_call_reward` is the rule for a prompt that offers tools (general RL's tool route): 1 when
the reply makes at least one tool call, parses cleanly and every call fits the schema of an
offered tool (the `tool_format` suite's check), else 0. Mixed into general RL, it keeps the
chat format gate, which punishes tool calls in plain chat, from teaching the policy never to
call a tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from arcforge.chat.validate import validate_call
from arcforge.types import Reward, Task, Tool, ToolCall
from arcforge.world.tasks.constrained_chat import check_constraints

GATES = ("format", "required", "forbidden", "json")
BOILERPLATE = (
    "as an ai language model",
    "as a large language model",
    "i am just an ai",
    "i hope this helps",
    "feel free to ask",
)
_SPECIAL = re.compile(r"<\|[a-z_]+\|>|</?think>|</?tool_call>")
_REQUIRED = ("include", "starts_with", "ends_with")


def format_gate(text: str, parse_errors: Sequence[str] = (), n_tool_calls: int = 0) -> str | None:
    """None when the reply is well formed, else why not."""
    if parse_errors:
        return f"malformed reply: {parse_errors[0]}"
    if n_tool_calls:
        return f"{n_tool_calls} tool call(s) in a reply that needs plain text"
    if not text.strip():
        return "empty reply"
    m = _SPECIAL.search(text)
    return f"stray markup {m.group(0)!r} in the visible text" if m else None


def required_gate(text: str, constraints: list[dict[str, Any]]) -> str | None:
    """None when every explicitly required piece of content is present."""
    need = [c for c in constraints if c.get("type") in _REQUIRED]
    _, ok = check_constraints(text, need)
    missing = [need[int(k.split(":")[0])] for k, v in ok.items() if not v]
    return f"missing required content {missing[0]}" if missing else None


def forbidden_gate(text: str, constraints: list[dict[str, Any]]) -> str | None:
    """None when no forbidden word or boilerplate phrase appears."""
    bad = [c for c in constraints if c.get("type") == "exclude"]
    _, ok = check_constraints(text, bad)
    hit = [bad[int(k.split(":")[0])]["word"] for k, v in ok.items() if not v]
    if hit:
        return f"forbidden word {hit[0]!r}"
    low = " ".join(text.lower().split())
    phrase = next((p for p in BOILERPLATE if p in low), None)
    return f"boilerplate phrase {phrase!r}" if phrase else None


def wants_json(task: Task) -> bool:
    cons = task.validation.constraints
    return task.metadata.get("format") == "json" or any(c.get("type") == "json_keys" for c in cons)


def json_gate(text: str, task: Task) -> str | None:
    """None unless the task asks for JSON and the reply is not one valid JSON value."""
    if not wants_json(task):
        return None
    try:
        json.loads(text.strip())
    except ValueError as err:
        return f"invalid JSON: {err}"
    return None


def rule_reward(
    text: str,
    task: Task,
    *,
    gates: Sequence[str] = GATES,
    parse_errors: Sequence[str] = (),
    n_tool_calls: int = 0,
) -> Reward:
    """Gated constraint score of one reply (see the module docstring).

    Args:
        text: the reply's visible content (think block and tool calls removed).
        task: the instruction; its validation.constraints are the checkable rules.
        gates: which gates apply (a subset of GATES).
        parse_errors / n_tool_calls: what parsing the raw reply found.
    Returns:
        Reward(score in [0, 1], details: gates {name: why-or-None}, constraints, fraction).
    """
    unknown = sorted(set(gates) - set(GATES))
    if unknown:
        raise ValueError(f"unknown rule gate(s) {unknown}; known: {list(GATES)}")
    cons = task.validation.constraints
    checks = {
        "format": lambda: format_gate(text, parse_errors, n_tool_calls),
        "required": lambda: required_gate(text, cons),
        "forbidden": lambda: forbidden_gate(text, cons),
        "json": lambda: json_gate(text, task),
    }
    why = {g: checks[g]() for g in gates}
    frac, per = check_constraints(text, cons)
    failed = [g for g, w in why.items() if w is not None]
    details = {"gates": why, "gate_failed": failed, "constraints": per, "fraction": frac}
    return Reward(0.0 if failed else frac, details)


def tool_call_reward(
    task: Task, calls: Sequence[ToolCall], parse_errors: Sequence[str], tools: dict[str, Tool]
) -> Reward:
    """1.0 when the reply calls tools the task offers, well formed and schema-valid; else 0."""
    offered = {n: tools[n] for n in task.tools if n in tools}
    if parse_errors:
        why = f"malformed reply: {parse_errors[0]}"
    elif not calls:
        why = "no tool call where tools are offered"
    else:
        why = next((e for e in (validate_call(c, offered) for c in calls) if e), None)
    return Reward(
        0.0 if why else 1.0, {"route": "tool_call", "rule": 0.0 if why else 1.0, "why": why}
    )
