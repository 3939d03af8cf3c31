"""Questions over the knowledge graph: 1-hop and 2-hop tool questions, calculator questions
and 2-3 hop search questions, each with its answer, path and oracle tool calls.

Questions are compositional: a k-hop question nests relation noun phrases ("the founder of
X") inside a final relation question ("Where was ... born?"). Every relation is functional, so
every question has exactly one answer on the graph.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from arcforge.world.knowledge.kb import KB, Triple
from arcforge.world.knowledge.tools import calculate

QUESTION = {
    "born_in": "Where was {s} born?",
    "lives_in": "In which city does {s} live?",
    "works_for": "Which organisation does {s} work for?",
    "born_year": "In which year was {s} born?",
    "occupation": "What is the occupation of {s}?",
    "founded_by": "Who founded {s}?",
    "headquartered_in": "In which city is {s} headquartered?",
    "founded_year": "In which year was {s} founded?",
    "industry": "Which industry is {s} in?",
    "created_by": "Who created {s}?",
    "published_by": "Which organisation published {s}?",
    "published_year": "In which year was {s} published?",
    "located_in": "In which country is {s}?",
    "population": "What is the population of {s}?",
    "capital": "What is the capital of {s}?",
    "work_type": "What kind of work is {s}?",
}
NOUN = {
    "born_in": "the birthplace of {s}",
    "lives_in": "the home city of {s}",
    "works_for": "the employer of {s}",
    "founded_by": "the founder of {s}",
    "headquartered_in": "the headquarters city of {s}",
    "created_by": "the creator of {s}",
    "published_by": "the publisher of {s}",
    "located_in": "the country of {s}",
    "capital": "the capital of {s}",
}


@dataclass
class Question:
    text: str
    answer: str
    path: list[Triple]
    calls: list[dict[str, Any]] = field(default_factory=list)  # oracle tool calls, in order

    @property
    def hops(self) -> int:
        return len(self.path)


def _walk(rng: random.Random, kb: KB, start: str, hops: int) -> list[Triple] | None:
    path, node = [], start
    for i in range(hops):
        options = [t for t in kb.out.get(node, []) if (t.relation in NOUN or i == hops - 1)]
        if i < hops - 1:
            options = [t for t in options if kb.is_entity(t.object)]
        if not options:
            return None
        t = rng.choice(options)
        path.append(t)
        node = t.object
    return path


def _render(path: list[Triple]) -> str:
    phrase = path[0].subject
    for t in path[:-1]:
        phrase = NOUN[t.relation].format(s=phrase)
    text = QUESTION[path[-1].relation].format(s=phrase)
    return text[0].upper() + text[1:]


def path_question(rng: random.Random, kb: KB, hops: int, starts: list[str]) -> Question | None:
    """A `hops`-hop question from a random start entity, or None when the walk dead-ends."""
    path = _walk(rng, kb, rng.choice(starts), hops)
    if path is None:
        return None
    calls = [
        {"name": "lookup", "arguments": {"entity": t.subject, "relation": t.relation}} for t in path
    ]
    return Question(_render(path), path[-1].object, path, calls)


def calc_question(rng: random.Random, kb: KB) -> Question:
    """Pure calculator arithmetic, or a looked-up year combined with arithmetic."""
    if rng.random() < 0.5:
        a, b, c = rng.randint(12, 999), rng.randint(2, 99), rng.randint(1, 500)
        op = rng.choice(["+", "-"])
        expr = f"{a} * {b} {op} {c}"
        text = f"What is {a} times {b} {'plus' if op == '+' else 'minus'} {c}?"
        return Question(
            text, calculate(expr), [], [{"name": "calculator", "arguments": {"expression": expr}}]
        )
    org = rng.choice(kb.of_type("org")).name
    year = kb.get(org, "founded_year") or "0"
    ref = rng.randint(2025, 2060)
    expr = f"{ref} - {year}"
    t = Triple(org, "founded_year", year)
    calls = [
        {"name": "lookup", "arguments": {"entity": org, "relation": "founded_year"}},
        {"name": "calculator", "arguments": {"expression": expr}},
    ]
    return Question(f"How many years old will {org} be in {ref}?", calculate(expr), [t], calls)
