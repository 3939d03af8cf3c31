"""Copy drills: short pretraining documents that can only be predicted by copying from context.

A tiny model trained on the world's pages memorises the knowledge base's names instead of
learning to copy (an in-context "induction" skill), so it cannot put a name from the question
into a tool call, quote a fact from far back in a long document or repeat a word an instruction
asked for. Every drill introduces fresh invented names (never the knowledge base's, drawn from a
separate name bank) and mentions them again later, in the shapes the later stages need: lists
recalled out of order, question/notes/answer, tool-call arguments, key/value records read back,
and long gaps filled with unrelated sentences.

`copy_drills(rng, target_chars, taken)` returns documents of the "web" domain until `target_chars`.
World option `copy_drills` (drill chars per web char; default 0) mixes them into the corpus.
At the demo's pretraining budget the tiny model forms no copying circuit with drills or without
(docs/experiments.md, "Teaching a tiny model to copy"), so the demo leaves the option off; it is
kept for longer pretraining runs, where the skill is known to appear.
"""

from __future__ import annotations

import json
import random

from arcforge.world.knowledge.names import NameBank, word
from arcforge.world.text.corpus import Doc

RELATIONS = ["works for", "lives in", "was born in", "founded", "wrote", "manages"]
KEYS = ["code", "city", "owner", "label", "colour", "tag", "host", "team"]
FILLER = [
    "The weather stayed mild for most of the week.",
    "Several reports were filed before the deadline.",
    "The archive keeps copies of every record.",
    "Nobody remembers who painted the old sign.",
    "A short meeting was held in the afternoon.",
    "The road to the harbour was closed for repairs.",
]


def _list_recall(rng: random.Random, nb: NameBank) -> str:
    names = [nb.person() for _ in range(rng.randint(3, 6))]
    order = names[:]
    rng.shuffle(order)
    return (
        f"Guest list: {', '.join(names)}.\n"
        f"Arrivals, in order: {', '.join(order)}.\n"
        f"The last guest to arrive was {order[-1]}; the first was {order[0]}."
    )


def _question_notes(rng: random.Random, nb: NameBank) -> str:
    people = [nb.person() for _ in range(rng.randint(2, 4))]
    rels = [(p, rng.choice(RELATIONS), nb.place()) for p in people]
    p, rel, obj = rng.choice(rels)
    notes = " ".join(f"{a} {r} {b}." for a, r, b in rels)
    return (
        f"Notes: {notes}\nQuestion: who or what does {p} relate to by '{rel}'?\n"
        f"Looking up {p}: {p} {rel} {obj}.\nAnswer: {obj}"
    )


def _tool_args(rng: random.Random, nb: NameBank) -> str:
    ent = rng.choice([nb.person, nb.org, nb.place])()
    rel = rng.choice(["works_for", "born_in", "founded_year", "located_in", "capital"])
    call = json.dumps({"name": "lookup", "arguments": {"entity": ent, "relation": rel}})
    return (
        f"Request: find the {rel.replace('_', ' ')} of {ent}.\n"
        f"I need the {rel.replace('_', ' ')} of {ent}.\nCall: {call}"
    )


def _records(rng: random.Random, nb: NameBank) -> str:
    keys = rng.sample(KEYS, rng.randint(3, 5))
    vals = {k: word(rng, rng.randint(2, 3)) + str(rng.randint(1, 99)) for k in keys}
    lines = [f"{k} = {v}" for k, v in vals.items()]
    asked = rng.sample(keys, rng.randint(1, len(keys)))
    reads = [f"{k} is {vals[k]}" for k in asked]
    return "Record:\n" + "\n".join(lines) + "\nRead back: " + "; ".join(reads) + "."


def _long_gap(rng: random.Random, nb: NameBank) -> str:
    who, where = nb.person(), nb.place()
    gap = " ".join(rng.choice(FILLER) for _ in range(rng.randint(4, 14)))
    return (
        f"{who} keeps the key to the gate at {where}. {gap} "
        f"Who keeps the key to the gate at {where}? {who}."
    )


def _spelling(rng: random.Random, nb: NameBank) -> str:
    w = rng.choice([nb.person, nb.org, nb.work])()
    return f'The name is "{w}". Written again: "{w}". In capitals: "{w.upper()}".'


DRILLS = [_list_recall, _question_notes, _tool_args, _records, _long_gap, _spelling]


def copy_drills(
    rng: random.Random, target_chars: int, taken: set[str] = frozenset(), prefix: str = "drill"
) -> list[Doc]:
    """Drill documents (3-6 drills each) totalling about `target_chars` characters; names in
    `taken` (the knowledge base's) are never used."""

    def bank() -> NameBank:
        nb = NameBank(random.Random(rng.random()))
        nb.used |= set(taken)
        return nb

    nb = bank()
    docs: list[Doc] = []
    chars = 0
    while chars < target_chars:
        text = "\n\n".join(rng.choice(DRILLS)(rng, nb) for _ in range(rng.randint(3, 6)))
        docs.append(Doc(f"{prefix}-{len(docs):06d}", text, "web"))
        chars += len(text)
        if len(nb.used) > len(taken) + 2000:  # keep the bank's rejection sampling fast
            nb = bank()
    return docs
