"""Preference pairs for reward-model training, made from the world's chat tasks.

For each instruction the chosen reply is the task's scripted solution (it meets every
constraint); the rejected reply is that solution broken in one way a reward model should learn
to dislike: one constraint violated (case, commas, a required word dropped, a forbidden word
added, too long, too short, a missing prefix/suffix, a JSON key dropped or the JSON broken), or
a generic failure (verbose, boilerplate-padded "AI-flavoured" answer; an off-topic answer
about somebody else). Every rejected reply is checked to really score lower under
`check_constraints`, so the label is true by construction. Pairs of train tasks and of test
tasks never share a prompt (they inherit the task split).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from arcforge.types import Task
from arcforge.world.tasks.constrained_chat import FILLER_WORDS, check_constraints

PADDING = (
    "I hope this helps, and feel free to ask if you have any other questions.",
    "This is a really interesting question and there is a lot to say about it.",
    "Let me know if you would like me to go into more detail on any part of this.",
)


@dataclass
class PreferencePair:
    """One labelled comparison: `chosen` is better than `rejected` for `prompt`."""

    id: str
    prompt: str
    chosen: str
    rejected: str
    reason: str  # how the rejected reply was broken
    task_id: str = ""
    split: str = "train"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _words(text: str) -> list[str]:
    return text.split()


def _break_json(text: str, c: dict, rng: random.Random) -> str:
    try:
        obj = json.loads(text)
    except ValueError:
        return text[:-1]
    if rng.random() < 0.5 and len(obj) > 1:
        obj.pop(rng.choice(sorted(obj)))
        return json.dumps(obj)
    return text.rstrip("}").rstrip() + ","  # unterminated object


# constraint type -> a way to violate it (text, constraint, rng) -> broken text
VIOLATIONS: dict[str, Callable[[str, dict, random.Random], str]] = {
    "lowercase": lambda t, c, r: t.upper(),
    "uppercase": lambda t, c, r: t.lower(),
    "no_commas": lambda t, c, r: re.sub(r"\s", ", ", t, count=1),
    "include": lambda t, c, r: re.sub(re.escape(c["word"]), "someone", t, flags=re.I),
    "exclude": lambda t, c, r: f"{c['word']} {t}" if r.random() < 0.5 else f"{t} {c['word']}",
    "max_words": lambda t, c, r: t + " " + " ".join(r.choice(FILLER_WORDS) for _ in range(8)),
    "min_words": lambda t, c, r: " ".join(_words(t)[:2]),
    "starts_with": lambda t, c, r: t[len(c["phrase"]) :].lstrip(": ").strip(),
    "ends_with": lambda t, c, r: t.strip()[: -len(c["phrase"])].rstrip("; ").strip(),
    "json_keys": _break_json,
}


def _verbose(text: str, rng: random.Random) -> str:
    pad = rng.sample(PADDING, 2)
    return f"{pad[0]} {text} {pad[1]}"


def rejected_candidates(
    task: Task, others: list[Task], rng: random.Random
) -> list[tuple[str, str]]:
    """(reason, text) candidates for the rejected reply of `task` (not yet checked)."""
    sol = task.metadata["solution"]
    out = [
        (f"violates {c['type']}", VIOLATIONS[c["type"]](sol, c, rng))
        for c in task.validation.constraints
        if c.get("type") in VIOLATIONS
    ]
    out.append(("verbose", _verbose(sol, rng)))
    if others:
        other = rng.choice(others).metadata["solution"]
        out.append(("off_topic", other))
    return out


def make_pair(task: Task, others: list[Task], rng: random.Random) -> PreferencePair | None:
    """One pair for a chat task, or None when no candidate is really worse than the solution."""
    sol = task.metadata.get("solution")
    if not sol:
        return None
    cons = task.validation.constraints
    cands = rejected_candidates(task, others, rng)
    rng.shuffle(cands)
    for reason, text in cands:
        worse = check_constraints(text, cons)[0] < 1.0
        if reason in ("verbose", "off_topic"):
            worse = True  # generic failures: judged by the rubric, not by a constraint
        if text.strip() and text != sol and worse:
            return PreferencePair("", task.instruction, sol, text, reason, task.id, task.split)
    return None


def preference_pairs(tasks: list[Task], seed: int, per_task: int = 1) -> list[PreferencePair]:
    """Up to `per_task` pairs for each chat task with a solution, deterministically from `seed`.

    Args:
        tasks: chat tasks (one split); off-topic replies come from the other tasks in the list.
        seed: the world seed (with the split, it fixes every choice).
        per_task: pairs per task (different rejected replies where possible).
    """
    split = tasks[0].split if tasks else "train"
    rng = random.Random(f"{seed}:preferences:{split}")
    out: list[PreferencePair] = []
    for i, task in enumerate(tasks):
        others = tasks[:i] + tasks[i + 1 :]
        seen: set[str] = set()
        for _ in range(per_task * 3):
            if len(seen) >= per_task:
                break
            pair = make_pair(task, others, rng)
            if pair is None or pair.rejected in seen:
                continue
            seen.add(pair.rejected)
            pair.id = f"pref-{split}-{len(out):05d}"
            out.append(pair)
    return out
