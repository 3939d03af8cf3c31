"""Multi-hop question drafts on a web knowledge graph: sampling, graph checks, rendering, evolution.

A `Draft` is a path start -hop-> ... -hop-> answer plus how the question names its ends. Paths
are sampled backward (GLM-5): first a low-to-mid frequency answer entity, then k hops walked
toward a start, so the answer is fixed before the question exists. A hop is a relation followed
forward ("the employer of X") or inversely ("the organisation founded by X"); inverse hops are
often ambiguous and the uniqueness check (`answer_set` == {answer}) removes those.
The Tongyi sampler first takes a random-walk subgraph around a seed entity and samples the path
inside it (uniqueness is still checked on the whole graph).

Query evolution (MiniMax WebExplorer), each step kept only while the answer stays unique:
- indirect: replace the start's name by an indirect description (facts that pin it down);
- remove_salient: drop the most selective (most searchable) fact from that description;
- obfuscate: blur exact values (a year -> its decade, a population -> "about" +-10%).
Uncertainty injection (Tongyi): describe the start by a vague fact shared by several entities
(a set), then restore uniqueness with facts about the answer (set intersection).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from arcforge.synth.wkg import LITERAL_RELATIONS, WebGraph
from arcforge.world.tasks.questions import NOUN, QUESTION

YEARS = ("born_year", "founded_year", "published_year")
TYPE_NOUN = {
    "person": "person",
    "city": "city",
    "country": "country",
    "org": "organisation",
    "work": "work",
    "entity": "entity",
}
INV_NOUN = {
    "born_in": "the person born in {s}",
    "lives_in": "the person who lives in {s}",
    "works_for": "the person who works for {s}",
    "founded_by": "the organisation founded by {s}",
    "headquartered_in": "the organisation headquartered in {s}",
    "created_by": "the work created by {s}",
    "published_by": "the work published by {s}",
    "located_in": "the city located in {s}",
    "capital": "the country whose capital is {s}",
}
INV_QUESTION = {
    "born_in": "Which person was born in {s}?",
    "lives_in": "Which person lives in {s}?",
    "works_for": "Which person works for {s}?",
    "founded_by": "Which organisation was founded by {s}?",
    "headquartered_in": "Which organisation is headquartered in {s}?",
    "created_by": "Which work was created by {s}?",
    "published_by": "Which work was published by {s}?",
    "located_in": "Which city is located in {s}?",
    "capital": "Which country has {s} as its capital?",
}
DESC = {
    "born_in": "born in {v}",
    "lives_in": "who lives in {v}",
    "works_for": "who works for {v}",
    "born_year": "born in {v}",
    "occupation": "who works as a {v}",
    "located_in": "in {v}",
    "population": "with a population of {v}",
    "founded_by": "founded by {v}",
    "headquartered_in": "headquartered in {v}",
    "founded_year": "founded in {v}",
    "industry": "in the {v} industry",
    "created_by": "created by {v}",
    "published_by": "published by {v}",
    "published_year": "published in {v}",
    "work_type": "that is a {v}",
    "capital": "whose capital is {v}",
}


@dataclass(frozen=True)
class Hop:
    relation: str
    inverse: bool = False


@dataclass(frozen=True)
class Constraint:
    """`x relation value` under a mode: eq, decade (value is the decade's first year) or approx
    (a number within +-10% of value)."""

    relation: str
    value: str
    mode: str = "eq"

    def holds(self, obj: str) -> bool:
        if self.mode == "eq":
            return obj == self.value
        if not (obj.isdigit() and self.value.isdigit()):
            return False
        o, v = int(obj), int(self.value)
        return v <= o < v + 10 if self.mode == "decade" else abs(o - v) <= 0.1 * v

    def phrase(self) -> str:
        v = {"decade": f"the {self.value}s", "approx": f"about {self.value}"}.get(
            self.mode, self.value
        )
        return DESC[self.relation].format(v=v)


@dataclass
class Draft:
    """A question draft: nodes[0] -hops[0]-> nodes[1] ... -> nodes[-1] (the answer)."""

    nodes: list[str]
    hops: list[Hop]
    start_desc: list[Constraint] | None = None  # None: the start is named
    answer_desc: list[Constraint] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    sampler: str = "backward"

    @property
    def answer(self) -> str:
        return self.nodes[-1]

    @property
    def path(self) -> list[tuple[str, str, str]]:
        """The graph triple behind each hop, as stored (subject, relation, object)."""
        out = []
        for h, a, b in zip(self.hops, self.nodes, self.nodes[1:]):
            out.append((b, h.relation, a) if h.inverse else (a, h.relation, b))
        return out

    def to_dict(self) -> dict:
        return {
            "nodes": self.nodes,
            "hops": [[h.relation, h.inverse] for h in self.hops],
            "start_desc": None
            if self.start_desc is None
            else [[c.relation, c.value, c.mode] for c in self.start_desc],
            "answer_desc": [[c.relation, c.value, c.mode] for c in self.answer_desc],
            "ops": self.ops,
            "sampler": self.sampler,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Draft:
        sd = d.get("start_desc")
        return cls(
            list(d["nodes"]),
            [Hop(r, bool(i)) for r, i in d["hops"]],
            None if sd is None else [Constraint(*c) for c in sd],
            [Constraint(*c) for c in d.get("answer_desc") or []],
            list(d.get("ops") or []),
            d.get("sampler", "backward"),
        )

    def plan(self, start_type: str) -> dict:
        """The structured question (what a perfect parser of the question would produce)."""
        desc = [[c.relation, c.value, c.mode] for c in self.start_desc or []]
        return {
            "start": None if self.start_desc else self.nodes[0],
            "start_desc": desc,
            "start_type": start_type,
            "hops": [[h.relation, h.inverse] for h in self.hops],
            "answer_desc": [[c.relation, c.value, c.mode] for c in self.answer_desc],
        }


def plan_parts(plan: dict) -> tuple[str | None, list[Constraint], list[Hop], list[Constraint]]:
    """(start name, start description, hops, answer description) of a `Draft.plan()` dict."""
    start_desc = [Constraint(*c) for c in plan.get("start_desc") or []]
    hops = [Hop(r, bool(inv)) for r, inv in plan["hops"]]
    return (
        plan.get("start"),
        start_desc,
        hops,
        [Constraint(*c) for c in plan.get("answer_desc") or []],
    )


# ---------------------------------------------------------------- graph queries


def matches(graph: WebGraph, c: Constraint) -> set[str]:
    """Entities x with a fact (x, c.relation, o) where c holds for o."""
    return {s for s, o in graph.by_relation.get(c.relation, []) if c.holds(o)}


def described(graph: WebGraph, constraints: list[Constraint], etype: str | None = None) -> set[str]:
    """The entities (of `etype`, when given) satisfying every constraint."""
    out: set[str] | None = None
    for c in constraints:
        m = matches(graph, c)
        out = m if out is None else out & m
    out = out or set()
    return {e for e in out if etype is None or graph.types.get(e) == etype}


def follow(graph: WebGraph, starts: set[str], hops: list[Hop]) -> set[str]:
    """Every entity reached from `starts` along `hops` on the graph."""
    cur = set(starts)
    for h in hops:
        if h.inverse:
            cur = {s for o in cur for s in graph.subjects(h.relation, o)}
        else:
            cur = {o for s in cur for o in graph.objects(s, h.relation)}
    return cur


def answer_set(graph: WebGraph, d: Draft) -> set[str]:
    """What the question denotes on the graph; it is unique when this is {d.answer}."""
    etype = graph.types.get(d.nodes[0])
    starts = described(graph, d.start_desc, etype) if d.start_desc else {d.nodes[0]}
    ends = follow(graph, starts, d.hops)
    if d.answer_desc:
        ends &= described(graph, d.answer_desc)
    return ends


def is_unique(graph: WebGraph, d: Draft) -> bool:
    return answer_set(graph, d) == {d.answer}


# ---------------------------------------------------------------- sampling


def answer_pool(graph: WebGraph, band: tuple[float, float]) -> list[str]:
    """Entities whose frequency lies in the (low, high) quantile band of all frequencies and
    that a path can end in (some forward or unique inverse hop leads to them)."""
    ranked = sorted(graph.entities, key=lambda e: (graph.freq[e], e))
    lo, hi = int(band[0] * len(ranked)), max(1, int(band[1] * len(ranked)))
    return [
        e for e in ranked[lo:hi] if any(_weight(graph, h, t, 1.0) for _, h, t in _options(graph, e))
    ]


def _options(graph: WebGraph, node: str) -> list[tuple[str, Hop, tuple[str, str, str]]]:
    """(previous node, hop into `node`, triple) for every entity edge touching `node`."""
    fwd = [(s, Hop(r), (s, r, node)) for s, r in graph.inc.get(node, [])]
    inv = [
        (o, Hop(r, True), (node, r, o))
        for r, o in graph.out.get(node, [])
        if r not in LITERAL_RELATIONS
    ]
    return fwd + inv


def _weight(graph: WebGraph, hop: Hop, triple: tuple[str, str, str], inverse: float) -> float:
    """Forward hops are functional (unique by construction): 1. An inverse hop is unique only
    when its object has a single subject for the relation: `inverse`; else 0 (ambiguous)."""
    if not hop.inverse:
        return 1.0
    return inverse if len(graph.subjects(hop.relation, triple[2])) == 1 else 0.0


def sample_backward(
    graph: WebGraph,
    rng: random.Random,
    answer: str,
    k: int,
    allowed: set | None = None,
    inverse_weight: float = 0.3,
    ambiguous_prob: float = 0.05,
) -> Draft | None:
    """Walk k hops backward from `answer` (simple path; inside `allowed` triples if given).
    Where only ambiguous hops are left, one is taken with probability `ambiguous_prob` (the
    uniqueness filter then judges the question), else the walk dead-ends (None)."""
    nodes, hops = [answer], []
    for _ in range(k):
        opts = [
            o
            for o in _options(graph, nodes[0])
            if o[0] not in nodes and (allowed is None or o[2] in allowed)
        ]
        weights = [_weight(graph, h, t, inverse_weight) for _, h, t in opts]
        if opts and sum(weights) <= 0 and rng.random() < ambiguous_prob:
            weights = [1.0] * len(opts)
        if not opts or sum(weights) <= 0:
            return None
        prev, hop, _ = rng.choices(opts, weights)[0]
        nodes.insert(0, prev)
        hops.insert(0, hop)
    return Draft(nodes, hops)


def random_walk_subgraph(
    graph: WebGraph, rng: random.Random, seed: str, steps: int
) -> set[tuple[str, str, str]]:
    """Triples visited by a random walk (edges in both directions) from `seed` (Tongyi)."""
    seen: set[tuple[str, str, str]] = set()
    node = seed
    for _ in range(steps):
        opts = _options(graph, node)
        if not opts:
            node = seed
            continue
        other, _, triple = rng.choice(opts)
        seen.add(triple)
        node = other if rng.random() < 0.85 else seed  # restart now and then
    return seen


# ---------------------------------------------------------------- rendering


def describe_phrase(graph: WebGraph, etype: str, cs: list[Constraint]) -> str:
    """ "the pilot born in the 1950s who lives in X" for a described entity."""
    noun = TYPE_NOUN.get(etype, "entity")
    rest = list(cs)
    for c in cs:
        if c.mode == "eq" and c.relation in ("occupation", "work_type"):
            noun, rest = c.value, [x for x in cs if x is not c]
            break
    return " ".join([f"the {noun}"] + [c.phrase() for c in rest])


def render(graph: WebGraph, d: Draft) -> str:
    """The template question for a draft (nested noun phrases, then the last hop's question)."""
    etype = graph.types.get(d.nodes[0], "entity")
    phrase = describe_phrase(graph, etype, d.start_desc) if d.start_desc else d.nodes[0]
    for h in d.hops[:-1]:
        phrase = (INV_NOUN if h.inverse else NOUN)[h.relation].format(s=phrase)
    last = d.hops[-1]
    text = (INV_QUESTION if last.inverse else QUESTION)[last.relation].format(s=phrase)
    if d.answer_desc:
        atype = TYPE_NOUN.get(graph.types.get(d.answer, "entity"), "entity")
        art = "an" if atype[0] in "aeiou" else "a"
        text += f" (It is {art} {atype} " + " and ".join(c.phrase() for c in d.answer_desc) + ".)"
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------- evolution


def _candidates(graph: WebGraph, d: Draft, entity: str, etype: str | None) -> list[Constraint]:
    """Facts about `entity` usable in its description, most selective first; never a fact
    whose value is a node of the path (that would leak a hop)."""
    out = []
    for r, o in graph.out.get(entity, []):
        if o in d.nodes or (d.hops and r == d.hops[0].relation and entity == d.nodes[0]):
            continue
        c = Constraint(r, o)
        out.append((len(described(graph, [c], etype)), r, o, c))
    return [c for *_, c in sorted(out, key=lambda t: t[:3])]


def indirect(graph: WebGraph, d: Draft, max_facts: int = 4) -> Draft | None:
    """Replace the start's name by its facts (up to max_facts, most selective first); None
    when they do not single it out."""
    etype = graph.types.get(d.nodes[0])
    cs = _candidates(graph, d, d.nodes[0], etype)[:max_facts]
    if not cs or described(graph, cs, etype) != {d.nodes[0]}:
        return None
    new = replace(d, start_desc=cs, ops=[*d.ops, "indirect"])
    return new if is_unique(graph, new) else None


def remove_salient(graph: WebGraph, d: Draft) -> Draft | None:
    """Drop the most selective fact of the start's description while the answer stays unique."""
    if not d.start_desc or len(d.start_desc) < 2:
        return None
    etype = graph.types.get(d.nodes[0])
    ranked = sorted(d.start_desc, key=lambda c: len(described(graph, [c], etype)))
    for c in ranked:
        new = replace(
            d, start_desc=[x for x in d.start_desc if x != c], ops=[*d.ops, "remove_salient"]
        )
        if is_unique(graph, new):
            return new
    return None


def _blur(c: Constraint) -> Constraint | None:
    if c.mode != "eq" or not c.value.isdigit():
        return None
    if c.relation in YEARS:
        return Constraint(c.relation, str(int(c.value) // 10 * 10), "decade")
    if c.relation == "population":
        v = int(c.value)
        return Constraint(c.relation, str(round(v, -len(str(v)) + 2)), "approx")
    return None


def obfuscate(graph: WebGraph, d: Draft) -> Draft | None:
    """Blur every exact year / population in the descriptions that can be blurred uniquely."""
    changed = False
    for side in ("start_desc", "answer_desc"):
        cs = list(getattr(d, side) or [])
        for i, c in enumerate(cs):
            b = _blur(c)
            if b is None:
                continue
            trial = replace(d, **{side: cs[:i] + [b] + cs[i + 1 :]})
            if is_unique(graph, trial):
                cs[i], d, changed = b, trial, True
    return replace(d, ops=[*d.ops, "obfuscate"]) if changed else None


def inject_uncertainty(
    graph: WebGraph, d: Draft, rng: random.Random, max_set: int = 8
) -> Draft | None:
    """Describe the start by one fact shared by 2..max_set entities, then add facts about the
    answer until the question is unique again; None when that fails."""
    if d.start_desc or any(h.inverse for h in d.hops) or not is_unique(graph, d):
        return None  # only on a unique path of functional hops: the answer set stays small
    etype = graph.types.get(d.nodes[0])
    vague = [
        c
        for c in _candidates(graph, d, d.nodes[0], etype)
        if 2 <= len(described(graph, [c], etype)) <= max_set
    ]
    if not vague:
        return None
    trial = replace(d, start_desc=[rng.choice(vague)], ops=[*d.ops, "uncertainty"])
    ends = answer_set(graph, trial)
    for c in _candidates(graph, trial, d.answer, None):
        if ends == {d.answer}:
            break
        trial = replace(trial, answer_desc=[*trial.answer_desc, c])
        ends = answer_set(graph, trial)
    return trial if ends == {d.answer} and len(trial.answer_desc) <= 2 else None
