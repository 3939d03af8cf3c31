"""The slide reward: static markup, runtime rendering and visual balance in one scalar.

    slide_i = content_i * (0.3 static_i + 0.4 runtime_i + 0.3 visual_i)
    deck    = sum_i slide_i / max(#outline slides, #slides)       (missing or extra slides: 0)

static (slides_static): valid HTML, design rules on declared CSS, no invented / duplicated
images. runtime (slides_render, real Chromium): the slide is 1280x720; nothing sticks out of it;
nothing is hidden by `overflow` (the cheat costs more than visible overflow, so hiding never
pays); no stretched spacing or tiny text in the computed styles. visual (slides_visual):
whitespace balance of the screenshot. content is a gate, not a level: the share of the outline
slide's title and bullets present in the rendered text, so an empty or off-topic slide scores 0
whatever its looks. Every level's findings are in `Reward.details` per slide, with the render
time. `slide_scores` gives the per-slide numbers the masked correction needs.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from arcforge.rewards.slides_render import DeckRender, SlideRender, SlideRenderer
from arcforge.rewards.slides_static import StaticReport, extract_html, static_check
from arcforge.rewards.slides_visual import whitespace
from arcforge.types import Reward, Task
from arcforge.world.tasks.slide_decks import DesignRules

LEVEL_WEIGHTS = {"static": 0.3, "runtime": 0.4, "visual": 0.3}
SIZE_PENALTY, CLIP_PENALTY, SPACING_PENALTY, SMALL_PENALTY = 0.3, 0.6, 0.15, 0.1


@dataclass
class SlideScore:
    """One slide's levels, its score and what was wrong."""

    static: float
    runtime: float
    visual: float
    content: float
    score: float
    problems: list[str] = field(default_factory=list)
    whitespace: dict[str, float] = field(default_factory=dict)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def coverage(outline_slide: dict[str, Any], text: str) -> float:
    """Share of the outline slide's title and bullets found in the rendered text (a line counts
    when 80% of its words occur in the slide text); the title weighs as much as all bullets."""
    have = set(_words(text))

    def found(line: str) -> float:
        ws = _words(line)
        return float(not ws or sum(w in have for w in ws) / len(ws) >= 0.8)

    bullets = outline_slide.get("bullets") or []
    part = sum(found(b) for b in bullets) / len(bullets) if bullets else 1.0
    return 0.5 * found(outline_slide["title"]) + 0.5 * part


def runtime_score(s: SlideRender, rules: DesignRules) -> tuple[float, list[str]]:
    """1 minus the rendering penalties of one slide, and their descriptions."""
    problems, pen = [], 0.0
    x, y, w, h = s.box
    if abs(w - rules.width) > 1 or abs(h - rules.height) > 1:
        pen += SIZE_PENALTY
        problems.append(f"slide is {w:g}x{h:g}, not {rules.width}x{rules.height}")
    if s.overflow:
        worst = max(o["px"] for o in s.overflow)
        pen += 0.15 + 0.35 * min(1.0, worst / 200)
        problems.append(f"{len(s.overflow)} element(s) overflow the slide, by up to {worst}px")
    if s.clipped:
        pen += CLIP_PENALTY
        c = s.clipped[0]
        problems.append(f"overflow hidden: {c['el']} hides {c['px']}px of content")
    props = sorted({v["prop"] for v in s.spacing})
    if props:
        pen += min(0.6, SPACING_PENALTY * len(props))
        problems.append(f"stretched spacing ({', '.join(props)}) beyond the design rules")
    if s.small:
        pen += min(0.3, SMALL_PENALTY * len(s.small))
        problems.append(f"{len(s.small)} text element(s) below {rules.font_px[0]}px")
    return max(0.0, 1.0 - pen), problems


def score_slides(static: StaticReport, render: DeckRender, task: Task) -> list[SlideScore]:
    """Per-slide scores for a checked and rendered deck (len = number of rendered slides)."""
    rules = DesignRules.from_dict(task.context["design"])
    outline = task.context["outline"]
    out = []
    for i, s in enumerate(render.slides):
        st = static.slide_score(i) if i < static.n_slides else 0.0
        rt, problems = runtime_score(s, rules)
        ws = whitespace(s.image) if s.image is not None and s.image.size else None
        vis = ws.score if ws else 0.0
        cov = coverage(outline[i], s.text) if i < len(outline) else 0.0
        if i < static.n_slides:
            problems = static.deck + static.slides[i] + static.image_problems[i] + problems
        if ws and vis < 1.0:
            problems.append(f"unbalanced whitespace (visual {vis:.2f})")
        if cov < 1.0:
            problems.append(f"outline content covered {cov:.2f}")
        levels = {"static": st, "runtime": rt, "visual": vis}
        score = cov * sum(LEVEL_WEIGHTS[k] * v for k, v in levels.items())
        out.append(SlideScore(st, rt, vis, cov, score, problems, ws.to_dict() if ws else {}))
    return out


def deck_reward(reply: str, task: Task, renderer: SlideRenderer | None = None) -> Reward:
    """Score a deck reply for a slides task (see the module docstring).

    Args:
        reply: the model's reply; the HTML is taken from a ```html fence or the document.
        task: a slides task (context: outline, assets, design).
        renderer: a SlideRenderer (default: one on this thread's shared browser).
    """
    for key in ("outline", "assets", "design"):
        if key not in task.context:
            raise ValueError(f"slides task {task.id!r} has no context[{key!r}]")
    rules = DesignRules.from_dict(task.context["design"])
    doc = extract_html(reply)
    static = static_check(doc, task.context["assets"], rules)
    if static.n_slides == 0:
        return Reward(
            0.0,
            {
                "problems": ['no <section class="slide"> in the reply'],
                "html_errors": static.html_errors[:10],
                "n_slides": 0,
            },
        )
    renderer = renderer or SlideRenderer()
    render = renderer.render(doc, task.context["assets"], rules)
    slides = score_slides(static, render, task)
    n = max(len(task.context["outline"]), len(slides))
    mean = {
        k: sum(getattr(s, k) for s in slides) / len(slides)
        for k in ("static", "runtime", "visual", "content")
    }
    details = {
        **{k: round(v, 4) for k, v in mean.items()},
        "n_slides": len(slides),
        "n_outline": len(task.context["outline"]),
        "render_ms": round(render.ms, 1),
        "html_errors": static.html_errors[:10],
        "blocked_requests": render.requests[:10],
        "per_slide": [asdict(s) for s in slides],
    }
    return Reward(sum(s.score for s in slides) / n, details)


def slide_scores(reward: Reward) -> list[float]:
    """The per-slide scores inside a deck reward's details ([] when nothing rendered)."""
    return [s["score"] for s in reward.details.get("per_slide", [])]
