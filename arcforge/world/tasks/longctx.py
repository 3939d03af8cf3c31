"""Long-context items: key facts placed far apart in filler made of world pages, or a long
multi-turn dialogue whose closing question recalls an early turn.

Train and test items draw filler from disjoint halves of the page list and use separately
seeded rngs, so held-out items never reuse a training item's facts or filler order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from arcforge.world.knowledge.kb import KB
from arcforge.world.knowledge.names import NameBank
from arcforge.world.knowledge.pages import Page, fact_sentence

NEEDLES = [
    ("The access code of {x} Depot is {v}.", "What is the access code of {x} Depot?"),
    ("The locker number of {x} is {v}.", "What is the locker number of {x}?"),
    ("The vault of {x} opens with the number {v}.", "Which number opens the vault of {x}?"),
    ("Project {x} meets in room {v}.", "In which room does project {x} meet?"),
]


@dataclass
class LongItem:
    text: str
    question: str
    answer: str
    kind: str  # "needle" | "dialogue"

    @property
    def chars(self) -> int:
        return len(self.text)


def _needle_item(rng: random.Random, names: NameBank, filler: list[str], target: int) -> LongItem:
    k = rng.randint(2, 4)
    facts = []
    for fmt, q in rng.sample(NEEDLES, k):
        x, v = names.token().capitalize(), str(rng.randint(100, 9999))
        facts.append((fmt.format(x=x, v=v), q.format(x=x), v))
    budget = max(0, target - sum(len(f[0]) + 2 for f in facts))
    chunks: list[str] = []
    while sum(len(c) + 2 for c in chunks) < budget:
        chunks.append(rng.choice(filler))
    # facts go at evenly spread positions so they sit far apart
    for i, (fact, _, _) in enumerate(facts):
        chunks.insert(round((i + 0.5) * len(chunks) / k) + i, fact)
    _, question, answer = rng.choice(facts)
    return LongItem("\n\n".join(chunks), question, answer, "needle")


def _dialogue_item(rng: random.Random, names: NameBank, kb: KB, target: int) -> LongItem:
    thing, value = rng.choice(
        [
            ("locker number", str(rng.randint(10, 999))),
            ("favourite colour", rng.choice(["teal", "amber", "violet"])),
            ("pet's name", names.token().capitalize()),
        ]
    )
    turns = [
        f"User: Please remember that my {thing} is {value}.\nAssistant: Noted, your {thing} is {value}."
    ]
    while sum(len(t) + 2 for t in turns) < target:
        t = rng.choice(kb.triples)
        q = f"Tell me about {t.subject}."
        turns.append(f"User: {q}\nAssistant: {fact_sentence(t)}")
    return LongItem("\n\n".join(turns), f"What is my {thing}?", value, "dialogue")


def make_long_items(
    kb: KB, pages: list[Page], n: int, target_chars: int, split: str, rng: random.Random
) -> list[LongItem]:
    """`n` items of about `target_chars` characters; every third one is a dialogue."""
    half = 0 if split == "train" else 1
    filler = [p.text for i, p in enumerate(pages) if i % 2 == half] or [p.text for p in pages]
    names = NameBank(rng)
    out = []
    for i in range(n):
        if i % 3 == 2:
            out.append(_dialogue_item(rng, names, kb, target_chars))
        else:
            out.append(_needle_item(rng, names, filler, target_chars))
    return out
