"""Web pages rendered from the knowledge graph, in deliberately varied layouts.

Every entity gets one main page in one of four layouts (infobox, prose, bullets, table rows).
Popular entities are also mentioned by news snippets and list pages ("People born in X"), so
their facts recur across pages in different surface forms; unpopular ones appear once. Pages of
held-out entities are flagged so that they only reach the held-out corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from arcforge.world.knowledge.kb import KB, RELATIONS, Entity, Triple

LAYOUTS = ["infobox", "prose", "bullets", "table"]
MAX_INCOMING = 6  # facts where the entity is the object, shown on its page
NEWS_VERBS = [
    "announced a new project",
    "opened an exhibition",
    "held a public meeting",
    "released a statement",
    "celebrated an anniversary",
    "hosted a festival",
]


@dataclass
class Page:
    id: str
    title: str
    text: str
    layout: str
    subject: str
    mentions: list[str] = field(default_factory=list)
    heldout: bool = False


def fact_sentence(t: Triple) -> str:
    """The canonical one-sentence rendering of a triple."""
    if t.relation == "work_type":
        return f"{t.subject} is a {t.object}."
    return f"{t.subject} {RELATIONS[t.relation]} {t.object}."


def _label(rel: str) -> str:
    return rel.replace("_", " ")


def _infobox(e: Entity, facts: list[Triple], inc: list[Triple]) -> str:
    rows = [f"{_label(t.relation)}: {t.object}" for t in facts]
    body = f"{e.name}\ntype: {e.type}\n" + "\n".join(rows)
    return body + ("\n\nRelated:\n" + "\n".join(fact_sentence(t) for t in inc) if inc else "")


def _bullets(e: Entity, facts: list[Triple], inc: list[Triple]) -> str:
    lines = [f"- {fact_sentence(t)}" for t in facts + inc]
    return f"Facts about {e.name}:\n" + "\n".join(lines)


def _table(e: Entity, facts: list[Triple], inc: list[Triple]) -> str:
    rows = [f"| {_label(t.relation)} | {t.object} |" for t in facts]
    rows += [f"| {_label(t.relation)} (of {t.subject}) | {t.object} |" for t in inc]
    return f"{e.name}\n| field | value |\n|---|---|\n" + "\n".join(rows)


def _prose(e: Entity, facts: list[Triple], inc: list[Triple]) -> str:
    f = {t.relation: t.object for t in facts}
    if e.type == "person":
        head = (
            f"{e.name} (born {f['born_year']} in {f['born_in']}) is a {f['occupation']} "
            f"who lives in {f['lives_in']}."
        )
        tail = f" {e.name.split()[0]} works for {f['works_for']}."
    elif e.type == "org":
        head = (
            f"{e.name} is a {f['industry']} company founded in {f['founded_year']} by "
            f"{f['founded_by']}."
        )
        tail = f" Its headquarters are in {f['headquartered_in']}."
    elif e.type == "work":
        head = (
            f"{e.name} is a {f['work_type']} created by {f['created_by']} and published "
            f"by {f['published_by']} in {f['published_year']}."
        )
        tail = ""
    else:
        head = " ".join(fact_sentence(t) for t in facts)
        tail = ""
    more = "".join(" " + fact_sentence(t) for t in inc)
    return f"{e.name}\n\n{head}{tail}{more}"


def _news(e: Entity, facts: list[Triple], inc: list[Triple], rng: random.Random) -> tuple[str, str]:
    year, verb = rng.randint(1990, 2024), rng.choice(NEWS_VERBS)
    title = f"{e.name} {verb} ({year})"
    known = rng.sample(facts, min(2, len(facts))) + inc[:1]
    background = " ".join(fact_sentence(t) for t in known)
    text = (
        f"{title}\n\nIn {year}, {e.name} {verb}. Observers gathered to follow the event. "
        f"For background: {background} More details are expected later this year."
    )
    return title, text


def _list_pages(kb: KB) -> list[tuple[str, str, str, list[str]]]:
    """(title, text, subject, mentions) for 'People born in X', 'Staff of Y', 'Works by Z'."""
    out = []
    specs = (
        ("city", "born_in", "People born in {}"),
        ("org", "works_for", "Staff of {}"),
        ("person", "created_by", "Works by {}"),
    )
    for etype, rel, title_fmt in specs:
        for e in kb.of_type(etype):  # type: ignore[arg-type]
            members = [t.subject for t in kb.inc.get(e.name, []) if t.relation == rel]
            if e.popularity == 0 or len(members) < 2:
                continue
            title = title_fmt.format(e.name)
            lines = [f"- {m}" for m in members]
            out.append((title, title + ":\n" + "\n".join(lines), e.name, members))
    return out


def render_pages(kb: KB, rng: random.Random) -> list[Page]:
    """Main page per entity, news pages per popularity point, list pages for popular hubs."""
    pages: list[Page] = []
    titles: set[str] = set()

    def add(title: str, text: str, layout: str, subject: str, mentions: list[str], held: bool):
        base, k = title, 2
        while title in titles:
            title, k = f"{base} ({k})", k + 1
        titles.add(title)
        pages.append(Page(f"page-{len(pages):05d}", title, text, layout, subject, mentions, held))

    for e in kb.entities:
        facts = list(kb.out.get(e.name, []))
        incoming = kb.inc.get(e.name, [])
        inc = rng.sample(incoming, min(len(incoming), MAX_INCOMING))
        layout = rng.choice(LAYOUTS)
        render = {"infobox": _infobox, "bullets": _bullets, "table": _table, "prose": _prose}
        text = render[layout](e, facts, inc)
        mentions = [e.name] + [t.object for t in facts] + [t.subject for t in inc]
        add(e.name, text, layout, e.name, mentions, e.heldout)
        for _ in range(e.popularity if facts else 0):
            title, text = _news(e, facts, inc, rng)
            add(title, text, "news", e.name, [e.name], e.heldout)
    for title, text, subject, members in _list_pages(kb):
        add(title, text, "list", subject, [subject, *members], False)
    return pages
