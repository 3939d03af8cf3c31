"""Chat / instruction tasks with checkable constraints, their checker and a scripted solver.

Constraints are data (`{"type": "max_words", "n": 20}`) so that they travel inside
`Validation.constraints`. `check_constraints` returns the fraction satisfied plus a per-constraint
breakdown. Word matching (include / exclude / starts_with / ends_with) is case-insensitive, so
`lowercase` can be combined with names. The solver writes a fact-based sentence (or a JSON
object) first and the task's numeric limits are then set around it, so it always complies.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from arcforge.world.knowledge.kb import KB

CONSTRAINT_TYPES = (
    "lowercase",
    "uppercase",
    "include",
    "exclude",
    "max_words",
    "min_words",
    "no_commas",
    "json_keys",
    "starts_with",
    "ends_with",
)
FILLER_WORDS = ["really", "very", "amazing", "basically", "literally", "truly"]


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9']+", text)


def _check_one(text: str, c: dict[str, Any]) -> bool:
    kind, low = c.get("type"), text.lower()
    if kind == "lowercase":
        return text == text.lower() and any(ch.isalpha() for ch in text)
    if kind == "uppercase":
        return text == text.upper() and any(ch.isalpha() for ch in text)
    if kind == "include":
        return str(c["word"]).lower() in low
    if kind == "exclude":
        return str(c["word"]).lower() not in {w.lower() for w in _words(text)}
    if kind == "max_words":
        return len(_words(text)) <= int(c["n"])
    if kind == "min_words":
        return len(_words(text)) >= int(c["n"])
    if kind == "no_commas":
        return "," not in text
    if kind == "starts_with":
        return low.strip().startswith(str(c["phrase"]).lower())
    if kind == "ends_with":
        return low.strip().endswith(str(c["phrase"]).lower())
    if kind == "json_keys":
        try:
            obj = json.loads(text.strip())
        except ValueError:
            return False
        return isinstance(obj, dict) and sorted(obj) == sorted(c["keys"])
    raise ValueError(f"unknown constraint type {kind!r}; expected one of {CONSTRAINT_TYPES}")


def check_constraints(
    text: str, constraints: list[dict[str, Any]]
) -> tuple[float, dict[str, bool]]:
    """Score `text` against `constraints`.

    Returns:
        (fraction of constraints satisfied, {"<index>:<type>": satisfied}); 1.0 when none.
    """
    details = {f"{i}:{c.get('type')}": _check_one(text, c) for i, c in enumerate(constraints)}
    return (sum(details.values()) / len(details) if details else 1.0), details


@dataclass
class ChatItem:
    prompt: str
    constraints: list[dict[str, Any]]
    solution: str


def _phrase(c: dict[str, Any]) -> str:
    kind = c["type"]
    return {
        "lowercase": "Use only lowercase letters.",
        "uppercase": "Write everything in capital letters.",
        "no_commas": "Do not use any commas.",
        "include": f"Mention the word '{c.get('word')}'.",
        "exclude": f"Do not use the word '{c.get('word')}'.",
        "max_words": f"Use at most {c.get('n')} words.",
        "min_words": f"Use at least {c.get('n')} words.",
        "starts_with": f"Start your answer with '{c.get('phrase')}'.",
        "ends_with": f"End your answer with '{c.get('phrase')}'.",
        "json_keys": f"Answer with a JSON object with exactly the keys {', '.join(c.get('keys', []))}.",
    }[kind]


def _sentence_item(rng: random.Random, kb: KB) -> ChatItem:
    person = rng.choice(kb.of_type("person")).name
    rel = rng.choice(["born_in", "lives_in", "works_for"])
    obj = kb.get(person, rel) or ""
    about = "place" if rel != "works_for" else "organisation"
    verb = {"born_in": "was born in", "lives_in": "lives in", "works_for": "works for"}[rel]
    text = f"{person} {verb} {obj}, according to the records."
    cons: list[dict[str, Any]] = [{"type": "include", "word": person.split()[0]}]
    extras = rng.sample(
        [
            "lowercase",
            "uppercase",
            "no_commas",
            "starts_with",
            "ends_with",
            "exclude",
            "max_words",
            "min_words",
        ],
        rng.randint(1, 3),
    )
    if "lowercase" in extras and "uppercase" in extras:
        extras.remove("uppercase")
    if "starts_with" in extras:
        c = {"type": "starts_with", "phrase": rng.choice(["In short", "Fact", "Note"])}
        text, cons = f"{c['phrase']}: {text}", cons + [c]
    if "ends_with" in extras:
        c = {"type": "ends_with", "phrase": rng.choice(["that is all.", "end of note.", "done."])}
        text, cons = f"{text[:-1]}; {c['phrase']}", cons + [c]
    for flag in ("no_commas", "lowercase", "uppercase"):
        if flag in extras:
            cons.append({"type": flag})
    if "no_commas" in extras:
        text = text.replace(",", "")
    if "lowercase" in extras:
        text = text.lower()
    if "uppercase" in extras:
        text = text.upper()
    n = len(_words(text))
    if "max_words" in extras:
        cons.append({"type": "max_words", "n": n + rng.randint(0, 5)})
    if "min_words" in extras:
        cons.append({"type": "min_words", "n": max(1, n - rng.randint(0, 4))})
    if "exclude" in extras:
        cons.append({"type": "exclude", "word": rng.choice(FILLER_WORDS)})
    prompt = f"Write one sentence saying which {about} {person} is linked to. " + " ".join(
        _phrase(c) for c in cons
    )
    return ChatItem(prompt, cons, text)


def _json_item(rng: random.Random, kb: KB) -> ChatItem:
    e = rng.choice(kb.of_type("person") + kb.of_type("org"))
    rels = [t.relation for t in kb.out[e.name]]
    keys = sorted(rng.sample(rels, rng.randint(2, 3)))
    obj = {"name": e.name, **{k: kb.get(e.name, k) for k in keys}}
    cons: list[dict[str, Any]] = [{"type": "json_keys", "keys": ["name", *keys]}]
    text = json.dumps(obj)
    if rng.random() < 0.3:
        cons.append({"type": "lowercase"})
        text = text.lower()
    prompt = f"Describe {e.name} as data. " + " ".join(_phrase(c) for c in cons)
    return ChatItem(prompt, cons, text)


def make_chat_item(rng: random.Random, kb: KB) -> ChatItem:
    """One instruction with 1-4 constraints and a compliant scripted answer."""
    return _json_item(rng, kb) if rng.random() < 0.25 else _sentence_item(rng, kb)
