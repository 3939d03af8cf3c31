"""Slide-deck tasks from the world's entities: topic + outline + assets + design rules -> HTML.

A task asks for one HTML document whose slides are `<section class="slide">` elements of exactly
1280x720 CSS pixels, in outline order. The topic is an organisation or a city of the KB; the
outline's bullets are facts about it and its neighbours (so content is checkable against the
world); the asset list names the only images the deck may use, each at most once; the design
rules bound font sizes, colours (a palette), spacing and line height. Everything travels in
`Task.context` (`topic`, `outline`, `assets`, `design`), so a task file is self-contained.

`reference_deck(task)` is the scripted expert: a clean deck that follows every rule. The slide
reward's acceptance test plants hacks into it; the SFT path uses it as a demonstration.
Simplification: assets are named, not drawn; the renderer serves a generated picture of the
declared size for each listed name.
"""

from __future__ import annotations

import html
import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from arcforge.types import Task
from arcforge.world.knowledge.kb import KB, RELATIONS

SLIDE_W, SLIDE_H = 1280, 720
THEMES: dict[str, dict[str, str]] = {
    "slate": {
        "bg": "#ffffff",
        "text": "#1f2937",
        "accent": "#1d4ed8",
        "muted": "#4b5563",
        "panel": "#e5e7eb",
    },
    "forest": {
        "bg": "#fbfdf9",
        "text": "#14281d",
        "accent": "#2f6b46",
        "muted": "#4a5a50",
        "panel": "#dfeee4",
    },
    "sunset": {
        "bg": "#fffaf3",
        "text": "#2d1e2f",
        "accent": "#b4441a",
        "muted": "#6b5a70",
        "panel": "#f6e3d3",
    },
}
TOPIC_TYPES = ("org", "city")


@dataclass
class DesignRules:
    """What a slide may declare: font sizes, palette colours, spacing and line height bounds."""

    width: int = SLIDE_W
    height: int = SLIDE_H
    font_px: tuple[int, int] = (16, 64)
    palette: list[str] = field(default_factory=lambda: list(THEMES["slate"].values()))
    max_spacing_px: int = 72  # any margin, padding or gap
    max_line_height: float = 1.8  # line-height / font-size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DesignRules:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"design rules have unknown key(s): {', '.join(unknown)}")
        d = dict(d)
        if "font_px" in d:
            d["font_px"] = tuple(d["font_px"])
        return cls(**d)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _sentence(kb: KB, subject: str, relation: str, obj: str) -> str:
    return f"{subject} {RELATIONS.get(relation, relation.replace('_', ' '))} {obj}"


def _outline(kb: KB, topic: str, rng: random.Random, n_content: int) -> list[dict[str, Any]]:
    """Title slide, then content slides: the topic's facts, who links to it, a neighbour."""
    etype = kb.by_name[topic].type
    facts = [_sentence(kb, t.subject, t.relation, t.object) for t in kb.out.get(topic, [])]
    links = [_sentence(kb, t.subject, t.relation, t.object) for t in kb.inc.get(topic, [])]
    rng.shuffle(links)
    neighbours = [t.object for t in kb.out.get(topic, []) if kb.is_entity(t.object)]
    subtitle = {"org": "An organisation profile", "city": "A city profile"}[etype]
    slides = [{"title": topic, "bullets": [subtitle]}]
    sections = [("Key facts", facts), ("Connections", links)]
    if neighbours:
        near = rng.choice(neighbours)
        near_facts = [_sentence(kb, t.subject, t.relation, t.object) for t in kb.out[near]]
        sections.append((f"About {near}", near_facts))
    for title, bullets in [s for s in sections if len(s[1]) >= 2][:n_content]:
        slides.append({"title": title, "bullets": bullets[: rng.randint(2, 4)]})
    return slides


def _assets(topic: str, outline: list[dict[str, Any]], rng: random.Random) -> list[dict]:
    """One picture per slide."""
    kinds = ["emblem", "photo", "map", "chart", "portrait"]
    assets = []
    for i, s in enumerate(outline):
        kind = kinds[i % len(kinds)]
        w, h = rng.choice([(480, 360), (440, 330), (400, 400)])
        src = f"assets/{slug(topic)}-{kind}-{i + 1}.png"
        assets.append({"src": src, "alt": f"{kind} for {s['title']}", "width": w, "height": h})
        s["image"] = src
    return assets


def _instruction(ctx: dict[str, Any]) -> str:
    d = ctx["design"]
    lines = [f"Create an HTML slide deck about {ctx['topic']}.", "", "Outline:"]
    for i, s in enumerate(ctx["outline"], 1):
        img = f" [image: {s['image']}]" if s.get("image") else ""
        lines.append(f"{i}. {s['title']}{img}")
        lines += [f"   - {b}" for b in s["bullets"]]
    lines += ["", "Images you may use (each at most once; no other images):"]
    lines += [f"- {a['src']} ({a['width']}x{a['height']}): {a['alt']}" for a in ctx["assets"]]
    lo, hi = d["font_px"]
    lines += [
        "",
        f'Design rules: every slide is a <section class="slide"> of exactly {d["width"]}x'
        f"{d['height']} px; font sizes {lo}-{hi} px; colours only from {', '.join(d['palette'])};"
        f" margins, paddings and gaps at most {d['max_spacing_px']} px; line height at most "
        f"{d['max_line_height']}; nothing may overflow a slide or be hidden to fit.",
        "Reply with one complete HTML document (<!DOCTYPE html>, styles in <style>).",
    ]
    return "\n".join(lines)


def make_slides_task(kb: KB, topic: str, rng: random.Random, theme: str | None = None) -> Task:
    """One slides task about `topic` (an entity name of `kb`)."""
    if topic not in kb.by_name:
        raise ValueError(f"unknown topic {topic!r}: not an entity of the world")
    theme = theme or rng.choice(sorted(THEMES))
    outline = _outline(kb, topic, rng, n_content=rng.randint(2, 3))
    assets = _assets(topic, outline, rng)
    design = DesignRules(palette=list(THEMES[theme].values()))
    ctx = {
        "topic": topic,
        "theme": theme,
        "outline": outline,
        "assets": assets,
        "design": design.to_dict(),
    }
    n_bullets = sum(len(s["bullets"]) for s in outline)
    return Task(
        id="",
        kind="slides",
        instruction=_instruction(ctx),
        context=ctx,
        difficulty=round(min(1.0, n_bullets / 12), 3),
        metadata={"scorer": "slides", "n_slides": len(outline)},
    )


def slides_tasks(kb: KB, n_train: int, n_test: int, seed: int = 0) -> tuple[list[Task], list[Task]]:
    """Disjoint train / test slides tasks; test topics are never train topics.

    Args:
        kb: the world's knowledge graph; topics are its organisations and cities.
        n_train, n_test: how many tasks per split (fewer when the KB has fewer topics).
        seed: picks topics, outlines, assets and themes.
    """
    rng = random.Random(f"{seed}:slides")
    topics = [
        e.name for e in kb.entities if e.type in TOPIC_TYPES and len(kb.inc.get(e.name, [])) >= 2
    ]
    rng.shuffle(topics)
    splits: tuple[list[Task], list[Task]] = ([], [])
    for split, (lo, hi) in (("train", (0, n_train)), ("test", (n_train, n_train + n_test))):
        out = splits[split == "test"]
        for i, topic in enumerate(topics[lo:hi]):
            t = make_slides_task(kb, topic, rng)
            t.id, t.split, t.source = f"slides-{split}-{i:05d}", split, "world:slides"
            out.append(t)
    return splits


# ---- the scripted expert ----------------------------------------------------------------------

_CSS = """* {{ box-sizing: border-box; }}
body {{ margin: 0; background: {panel}; font-family: "DejaVu Sans", sans-serif; }}
.slide {{ width: 1280px; height: 720px; padding: 56px 64px; background: {bg}; color: {text};
  display: flex; flex-direction: column; margin: 0 0 16px; }}
.slide h2 {{ font-size: 44px; line-height: 1.2; margin: 0 0 32px; color: {accent}; }}
.row {{ display: flex; flex: 1; gap: 48px; align-items: center; }}
.row ul {{ flex: 1; margin: 0; padding-left: 36px; font-size: 30px; line-height: 1.4; }}
.row li {{ margin-bottom: 24px; }}
.row img {{ width: 480px; height: 360px; border-radius: 12px; }}
.cover {{ background: {accent}; color: {bg}; justify-content: center; }}
.cover h1 {{ font-size: 60px; line-height: 1.2; margin: 0 0 24px; }}
.cover p {{ font-size: 32px; margin: 0; color: {panel}; }}
"""


def _slide_html(i: int, s: dict[str, Any], assets: dict[str, dict]) -> str:
    esc = html.escape
    img = ""
    if s.get("image") in assets:
        a = assets[s["image"]]
        img = f'<img src="{esc(a["src"])}" alt="{esc(a["alt"])}">'
    if i == 0:
        sub = "".join(f"<p>{esc(b)}</p>" for b in s["bullets"])
        return (
            f'<section class="slide cover"><div class="row"><div><h1>{esc(s["title"])}</h1>'
            f"{sub}</div>{img}</div></section>"
        )
    items = "".join(f"<li>{esc(b)}</li>" for b in s["bullets"])
    return (
        f'<section class="slide"><h2>{esc(s["title"])}</h2><div class="row">'
        f"<ul>{items}</ul>{img}</div></section>"
    )


def reference_deck(task: Task) -> str:
    """A clean deck for `task`: every rule followed, every asset used once, nothing clipped."""
    ctx = task.context
    theme = THEMES.get(ctx.get("theme", ""), None) or dict(
        zip(("bg", "text", "accent", "muted", "panel"), ctx["design"]["palette"], strict=False)
    )
    assets = {a["src"]: a for a in ctx["assets"]}
    body = "\n".join(_slide_html(i, s, assets) for i, s in enumerate(ctx["outline"]))
    title = html.escape(ctx["topic"])
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>\n{_CSS.format(**theme)}</style>\n</head>\n<body>\n"
        f"{body}\n</body>\n</html>\n"
    )
