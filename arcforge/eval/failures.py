"""Why agent episodes fail: one outcome per greedy eval episode, and the episodes themselves.

A suite score of 0 says nothing about where an agent went wrong. Each episode of an agent
suite gets the first thing that went wrong, in the order it happened:
    solved        verify() gave reward 1
    parse_error   a reply's tool call was malformed (the parser's `error:` observation)
    tool_error    a tool answered `error: ...` (unknown entity, no such document, bad path,
                  an unknown tool or wrong argument types: the environments' shared convention)
    env_error     the environment raised in step or verify
    wrong_answer  the episode ended with an answer and no error on the way, but verify() said no
    max_turns / context / length
                  the episode ran out of turns, of context, or its last reply was cut by
                  max_new_tokens, with no error before that
An episode whose first error was later recovered from still counts under that error: the
outcome names the first failing step, which is what a researcher fixing data looks for.

`episode_record` is the JSON line the harness writes per episode (`eval/<stage>/<suite>.jsonl`):
the task, reward, outcome and every message, so a failure can be read rather than guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from arcforge.types import Task, Trajectory

OUTCOMES = (
    "solved",
    "parse_error",
    "tool_error",
    "env_error",
    "wrong_answer",
    "max_turns",
    "context",
    "length",
)


def outcome(tr: Trajectory) -> tuple[str, str]:
    """(outcome, evidence): the episode's first failing step, and the text that shows it."""
    if tr.reward >= 1.0:
        return "solved", ""
    for m in tr.messages:
        if m.role == "tool" and (m.content or "").startswith("error:"):
            kind = "parse_error" if m.name == "parser" else "tool_error"
            return kind, (m.content or "")[:200]
    if tr.finish_reason == "error":
        return "env_error", str(tr.reward_details.get("error", ""))[:200]
    if tr.finish_reason in ("max_turns", "context", "length"):
        return tr.finish_reason, ""
    last = next((m.content or "" for m in reversed(tr.messages) if m.role == "assistant"), "")
    return "wrong_answer", last[-200:]


def tally(kinds: Iterable[str]) -> dict[str, int]:
    """{outcome: count} over the episodes' outcomes, in OUTCOMES order, zero counts left out."""
    c = Counter(kinds)
    return {k: c[k] for k in OUTCOMES if c[k]}


def episode_record(task: Task, tr: Trajectory) -> dict[str, Any]:
    kind, evidence = outcome(tr)
    return {
        "task_id": task.id,
        "instruction": task.instruction,
        "reward": tr.reward,
        "outcome": kind,
        "evidence": evidence,
        "finish": tr.finish_reason,
        "messages": [m.to_dict() for m in tr.messages],
    }
