"""Web knowledge graph (WKG): (subject, relation, object) facts extracted from web pages.

GLM-5 builds its search questions on a graph extracted from pages, not on a model's memory, so
that every hop of a question is backed by a page. Two extractors feed one graph:
- `extract_rules(doc)` reads structure: "label: value" rows (infobox), "| label | value |" and
  "| label (of S) | value |" rows (tables), list pages ("People born in X:" + "- member"), and
  canonical fact sentences ("A was born in B.") anywhere, bullets included. The subject of a row
  is the page's first line (its title). Sentences no rule explains are the page's free text.
- `extract_llm(docs, client)` asks an OpenAI-compatible LLM for the facts of pages that still
  have free text (prose heads, news). A returned fact is kept only if its relation is known and
  both its subject and object occur in the page (grounding; the rejects are counted).
Every fact keeps its page id (the evidence). `WebGraph` indexes the unique triples, their
evidence pages, entity frequencies (distinct pages whose facts mention the entity) and
conflicts (a functional relation with two objects on different pages).
Simplifications: the relation vocabulary is the world's (arcforge.world.knowledge.kb.RELATIONS); entity
linking is exact string identity. `score_against` compares a graph with ground truth and is
for checking extractors only; the extractors never see the ground truth.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arcforge.envs.search_env import Document, as_document
from arcforge.errors import UserError
from arcforge.world.knowledge.kb import RELATIONS

# relations whose object is a value (year, number, word), not an entity with its own page
LITERAL_RELATIONS = frozenset(
    {
        "born_year",
        "population",
        "founded_year",
        "published_year",
        "occupation",
        "industry",
        "work_type",
    }
)
# every relation of the vocabulary is functional: one object per subject
SUBJECT_TYPE = {
    "born_in": "person",
    "lives_in": "person",
    "works_for": "person",
    "born_year": "person",
    "occupation": "person",
    "located_in": "city",
    "population": "city",
    "founded_by": "org",
    "headquartered_in": "org",
    "founded_year": "org",
    "industry": "org",
    "created_by": "work",
    "published_by": "work",
    "published_year": "work",
    "work_type": "work",
    "capital": "country",
}
OBJECT_TYPE = {
    "born_in": "city",
    "lives_in": "city",
    "works_for": "org",
    "located_in": "country",
    "founded_by": "person",
    "headquartered_in": "city",
    "created_by": "person",
    "published_by": "org",
    "capital": "city",
}
LIST_TITLES = {"People born in": "born_in", "Staff of": "works_for", "Works by": "created_by"}

_LABELS = {rel.replace("_", " "): rel for rel in RELATIONS}
_PHRASES = sorted(RELATIONS.items(), key=lambda kv: -len(kv[1]))  # longest phrase first
# a name: capitalised words, possibly joined by "of" / "over" ("The Tower of Hiakria")
NAME = r"[A-Z][\w'-]*(?: (?:of |over )?[A-Z][\w'-]*)*"
_SENTENCE = [
    (rel, re.compile(rf"(?P<s>{NAME}) {re.escape(ph)} (?P<o>.+?)\.?$")) for rel, ph in _PHRASES
]
_ROW = re.compile(r"^\|\s*(?P<label>[^|]+?)\s*\|\s*(?P<value>[^|]+?)\s*\|$")
_OF = re.compile(r"^(?P<label>.+?) \(of (?P<s>.+)\)$")
_KV = re.compile(r"^(?P<label>[a-z][a-z ]*): (?P<value>.+)$")


@dataclass(frozen=True)
class Fact:
    """One extracted triple and the page it came from."""

    subject: str
    relation: str
    object: str
    page: str
    extractor: str = "rule"

    @property
    def triple(self) -> tuple[str, str, str]:
        return (self.subject, self.relation, self.object)


# A page as the extractors see it (id, title, text): the search environment's Document, so the
# graph's pages and the SearchEnv corpus built from them are one type.
Doc = Document
as_doc = as_document


def _valid_object(rel: str, obj: str) -> bool:
    if rel == "work_type":  # "X is a book." but never "X is a book created by ..."
        return re.fullmatch(r"[a-z]+", obj) is not None
    if rel in ("born_year", "founded_year", "published_year", "population"):
        return obj.isdigit()
    return bool(obj) and len(obj) <= 80


def parse_sentence(sentence: str, title: str = "") -> tuple[str, str, str] | None:
    """The triple of a canonical fact sentence ("A works for B."), or None. A lead-in such as
    "For background:" is skipped; a subject that is the first word of the page's `title`
    (a first name) is resolved to the title."""
    s = sentence.strip().removeprefix("- ").strip()
    for rel, pattern in _SENTENCE:
        m = pattern.search(s)
        if m and (m.start() == 0 or s[m.start() - 2 : m.start()] == ": "):
            subject, obj = m["s"].strip(), m["o"].strip()
            if not _valid_object(rel, obj):
                continue
            if title != subject and title.split(" ")[0] == subject and re.fullmatch(NAME, title):
                subject = title
            return subject, rel, obj
    return None


def _sentences(line: str) -> list[str]:
    return [s for s in re.split(r"(?<=\.)\s+", line.strip()) if s]


def _row_fact(line: str, title: str) -> tuple[str, str, str] | None:
    """A table row or an infobox "label: value" row about `title` (or about the row's "of S")."""
    m = _ROW.match(line) or _KV.match(line)
    if not m or m["label"] in ("field",):
        return None
    label, subject = m["label"].strip(), title
    of = _OF.match(label)
    if of:
        label, subject = of["label"], of["s"].strip()
    rel = _LABELS.get(label)
    value = m["value"].strip()
    if rel is None or not _valid_object(rel, value):
        return None
    return subject, rel, value


def extract_rules(doc: Any) -> tuple[list[Fact], list[str]]:
    """Facts the rules find in one page, and the page's free-text sentences they did not explain.

    Args:
        doc: a page (see `as_doc`).

    Returns:
        (facts, residue): facts tagged extractor="rule"; residue = unexplained sentences.
    """
    d = as_doc(doc)
    lines = [ln.strip() for ln in d.text.splitlines() if ln.strip()]
    title = lines[0] if lines else d.title  # the heading names the page's subject
    facts: list[Fact] = []
    residue: list[str] = []
    list_rel, list_obj = None, None
    for i, line in enumerate(lines):
        head = next(
            (k for k in LIST_TITLES if line.startswith(k + " ") and line.endswith(":")), None
        )
        if head is not None:
            list_rel, list_obj = LIST_TITLES[head], line[len(head) + 1 : -1].strip()
            continue
        if i == 0 or line == "Related:":
            continue
        if list_rel and line.startswith("- ") and parse_sentence(line, title) is None:
            facts.append(Fact(line[2:].strip(), list_rel, list_obj or "", d.id))
            continue
        row = _row_fact(line, title)
        if row is not None:
            facts.append(Fact(*row, page=d.id))
            continue
        if line.startswith("|") or re.fullmatch(r"type: \w+|Facts about .+:", line):
            continue
        for sent in _sentences(line):
            t = parse_sentence(sent, title)
            if t is not None:
                facts.append(Fact(*t, page=d.id))
            elif len(sent.split()) >= 3:
                residue.append(sent)
    return facts, residue


LLM_SYSTEM = (
    "You extract facts from a web page. Reply with JSON only: "
    '{"triples": [["subject", "relation", "object"], ...]}. Use only these relations: '
    "{relations}. Subjects and objects are names or values copied exactly from the page; "
    "resolve pronouns and first names to the full name."
)


def extract_llm(
    docs: Iterable[Any], client: Any, counts: Counter | None = None, max_chars: int = 1500
) -> list[Fact]:
    """Facts an LLM extracts from free-text pages, grounded in each page's text.

    Args:
        docs: the pages to read (one request each).
        client: an arcforge.llm.LLMClient.
        max_chars: page text sent per request (longer pages are cut).
        counts: optional Counter receiving llm_kept / llm_unknown_relation / llm_ungrounded /
            llm_malformed / llm_unparsable (pages whose reply had no JSON).

    Returns:
        Facts tagged extractor="llm".
    """
    from arcforge.llm import ask_json

    counts = counts if counts is not None else Counter()
    system = LLM_SYSTEM.replace("{relations}", ", ".join(RELATIONS))
    out: list[Fact] = []
    for raw in docs:
        d = as_doc(raw)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Page title: {d.title}\n\n{d.text[:max_chars]}"},
        ]
        try:  # an endpoint failure (LLMError) stops the build; a bad reply skips the page
            reply = ask_json(client, messages, max_tokens=1024)
        except ValueError:
            counts["llm_unparsable"] += 1
            continue
        items = reply.get("triples", []) if isinstance(reply, dict) else reply
        for item in items if isinstance(items, list) else []:
            if not (isinstance(item, list | tuple) and len(item) == 3):
                counts["llm_malformed"] += 1
                continue
            s, r, o = (str(x).strip() for x in item)
            r = r.replace(" ", "_")
            if r not in RELATIONS or not _valid_object(r, o):
                counts["llm_unknown_relation"] += 1
            elif s not in d.text or o not in d.text:
                counts["llm_ungrounded"] += 1
            else:
                counts["llm_kept"] += 1
                out.append(Fact(s, r, o, d.id, "llm"))
    return out


class WebGraph:
    """Unique triples with evidence pages, adjacency, entity types and frequencies."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.facts = list(dict.fromkeys(facts))  # dedupe, keep order
        self.evidence: dict[tuple[str, str, str], list[str]] = {}
        self.by_page: dict[str, list[tuple[str, str, str]]] = {}
        for f in self.facts:
            pages = self.evidence.setdefault(f.triple, [])
            if f.page not in pages:
                pages.append(f.page)
            self.by_page.setdefault(f.page, []).append(f.triple)
        self.out: dict[str, list[tuple[str, str]]] = {}
        self.inc: dict[str, list[tuple[str, str]]] = {}
        self.by_relation: dict[str, list[tuple[str, str]]] = {}
        self.types: dict[str, str] = {}
        for s, r, o in self.evidence:
            self.out.setdefault(s, []).append((r, o))
            self.by_relation.setdefault(r, []).append((s, o))
            self.types.setdefault(s, SUBJECT_TYPE.get(r, "entity"))
            if r not in LITERAL_RELATIONS:
                self.inc.setdefault(o, []).append((s, r))
                self.types.setdefault(o, OBJECT_TYPE.get(r, "entity"))
        pages_of: dict[str, set[str]] = {}
        for f in self.facts:
            for name in (f.subject, f.object):
                if name in self.types:
                    pages_of.setdefault(name, set()).add(f.page)
        self.freq: Counter[str] = Counter({e: len(p) for e, p in pages_of.items()})

    @property
    def entities(self) -> list[str]:
        return list(self.types)

    def objects(self, subject: str, relation: str) -> set[str]:
        return {o for r, o in self.out.get(subject, []) if r == relation}

    def subjects(self, relation: str, obj: str) -> set[str]:
        return {s for s, r in self.inc.get(obj, []) if r == relation}

    def conflicts(self) -> list[tuple[str, str, list[str]]]:
        """(subject, relation, objects) where pages disagree on a functional relation."""
        seen: dict[tuple[str, str], list[str]] = {}
        for s, r, o in self.evidence:
            seen.setdefault((s, r), []).append(o)
        return [(s, r, sorted(os)) for (s, r), os in seen.items() if len(os) > 1]

    def save(self, path: str | Path) -> None:
        """One JSON fact per line."""
        with open(path, "w") as f:
            for fact in self.facts:
                f.write(json.dumps(asdict(fact)) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> WebGraph:
        facts = []
        for i, line in enumerate(Path(path).read_text().splitlines()):
            try:
                facts.append(Fact(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as err:
                raise UserError(f"{path}:{i + 1}: not a WKG fact line ({err})") from None
        return cls(facts)


def build_graph(
    docs: Iterable[Any],
    client: Any = None,
    llm_max_pages: int | None = None,
    counts: Counter | None = None,
) -> WebGraph:
    """Rules over every page; the LLM (when given) over pages with free text left.

    Args:
        docs: the pages.
        client: optional LLMClient for free text.
        llm_max_pages: cap on pages sent to the LLM (None: all with residue).
        counts: optional Counter for pages, rule_facts, free_text_pages and the llm_* counts.
    """
    counts = counts if counts is not None else Counter()
    facts: list[Fact] = []
    free: list[Doc] = []
    for raw in docs:
        d = as_doc(raw)
        found, residue = extract_rules(d)
        counts["pages"] += 1
        counts["rule_facts"] += len(found)
        facts += found
        if residue:
            free.append(d)
    counts["free_text_pages"] += len(free)
    if client is not None and free:
        facts += extract_llm(free[:llm_max_pages], client, counts)
    return WebGraph(facts)


def score_against(graph: WebGraph, truth: Iterable[tuple[str, str, str]]) -> dict[str, float]:
    """Precision / recall of the graph's unique triples against ground-truth triples."""
    gold = set(truth)
    got = set(graph.evidence)
    hit = len(got & gold)
    return {
        "precision": hit / max(1, len(got)),
        "recall": hit / max(1, len(gold)),
        "triples": float(len(got)),
    }
