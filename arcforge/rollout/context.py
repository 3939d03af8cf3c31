"""Context management for long agent episodes: fold old observations, then discard them.

An agent episode grows by one assistant message and its observations per turn; tool outputs
(pages, file views, test logs) dominate. When the next generation would not fit the context
budget, `compact` shrinks the message list in stages, measuring after each one and stopping as
soon as it fits:

1. fold: every observation except the `keep_recent` most recent becomes a one-line summary
   (its first non-empty line, clipped, plus "[folded N chars]");
2. discard the folded observations;
3. shorten the progress notes: each assistant message's reasoning and content clipped to
   `note_chars` (tool calls are kept: they say what was done);
4. discard the recent observations too, oldest first;
5. discard the oldest progress notes.
The task (every message up to and including the first user message) is never touched.

Why lazy (only when over budget) rather than folding every turn: a compaction re-renders the
context, which breaks the token prefix the model's earlier tokens were sampled in. Folding on
every turn would leave no sampled token trainable (see arcforge.rollout.agent for what the
Trajectory keeps across a compaction). Deliberate simplification: summaries are extractive
(first line), not written by a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from arcforge.types import Message

_FOLDED = re.compile(r"\[folded \d+ chars\]$")


@dataclass(frozen=True)
class ContextConfig:
    """keep_recent: observations kept whole; fold_chars: width of a folded summary's text;
    note_chars: length progress notes (reasoning, content) are clipped to in stage 3."""

    keep_recent: int = 2
    fold_chars: int = 80
    note_chars: int = 160


@dataclass
class Compacted:
    """The compacted messages and the last stage that ran ("none" when nothing was needed)."""

    messages: list[Message]
    stage: str
    size: int


def task_end(messages: list[Message]) -> int:
    """Index one past the first user message: messages[:task_end] is the task, never touched."""
    for i, m in enumerate(messages):
        if m.role == "user":
            return i + 1
    return 1 if messages and messages[0].role == "system" else 0


def is_observation(m: Message) -> bool:
    """Tool results and later user messages (feedback) are observations."""
    return m.role in ("tool", "user")


def is_folded(m: Message) -> bool:
    return bool(_FOLDED.search(m.content))


def fold(message: Message, width: int = 80) -> Message:
    """A one-line summary of an observation: first non-empty line, clipped, + the folded size.

    Short one-line messages are returned unchanged (folding would not shrink them).
    """
    text = message.content
    if is_folded(message) or ("\n" not in text and len(text) <= width):
        return message
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > width:
        first = first[: width - 3] + "..."
    return replace(message, content=f"{first} [folded {len(text)} chars]")


def _observation_indices(messages: list[Message]) -> list[int]:
    start = task_end(messages)
    return [i for i in range(start, len(messages)) if is_observation(messages[i])]


def fold_observations(messages: list[Message], keep_recent: int, width: int = 80) -> list[Message]:
    """Fold every observation except the `keep_recent` most recent."""
    obs = _observation_indices(messages)
    old = set(obs[: max(0, len(obs) - keep_recent)])
    return [fold(m, width) if i in old else m for i, m in enumerate(messages)]


def discard_observations(messages: list[Message], keep_recent: int) -> list[Message]:
    """Remove every observation except the `keep_recent` most recent."""
    obs = _observation_indices(messages)
    old = set(obs[: max(0, len(obs) - keep_recent)])
    return [m for i, m in enumerate(messages) if i not in old]


def _clip(text: str | None, n: int) -> str | None:
    if text is None or len(text) <= n:
        return text
    return text[: max(0, n - 3)] + "..."


def shorten_notes(messages: list[Message], note_chars: int) -> list[Message]:
    """Clip every assistant message's reasoning and content after the task to `note_chars`."""
    start = task_end(messages)
    return [
        replace(m, reasoning=_clip(m.reasoning, note_chars), content=_clip(m.content, note_chars))
        if i >= start and m.role == "assistant"
        else m
        for i, m in enumerate(messages)
    ]


def _drop_first(messages: list[Message], pick: Callable[[Message], bool]) -> list[Message] | None:
    """Remove the first message after the task for which `pick` holds; None when none does."""
    for i in range(task_end(messages), len(messages)):
        if pick(messages[i]):
            return messages[:i] + messages[i + 1 :]
    return None


def compact(
    messages: list[Message],
    measure: Callable[[list[Message]], int],
    budget: int,
    cfg: ContextConfig = ContextConfig(),
) -> Compacted:
    """Shrink `messages` in stages (module docstring) until `measure(messages) <= budget`.

    Args:
        messages: the context (task, then assistant messages and observations).
        measure: the size of a message list in the caller's unit (the agent: prompt tokens plus
            the tokens reserved for the next reply).
        budget: the largest size allowed.
        cfg: how many observations stay whole and how far things are clipped.

    Returns:
        Compacted(messages, stage, size). `size > budget` when even the task alone (plus
        whatever could not be removed) does not fit; the caller decides what to do then.
    """
    size = measure(messages)
    if size <= budget:
        return Compacted(messages, "none", size)
    k = cfg.keep_recent
    stages: list[tuple[str, Callable[[list[Message]], list[Message]]]] = [
        ("fold", lambda ms: fold_observations(ms, k, cfg.fold_chars)),
        ("discard", lambda ms: discard_observations(ms, k)),
        ("shorten", lambda ms: shorten_notes(ms, cfg.note_chars)),
    ]
    for name, stage in stages:
        messages = stage(messages)
        size = measure(messages)
        if size <= budget:
            return Compacted(messages, name, size)
    for name, pick in (("discard_recent", is_observation), ("drop_notes", lambda m: True)):
        while size > budget:
            fewer = _drop_first(messages, pick)
            if fewer is None:
                break
            messages, size = fewer, measure(fewer)
        if size <= budget:
            return Compacted(messages, name, size)
    return Compacted(messages, "drop_notes", size)
