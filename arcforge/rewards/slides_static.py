"""Level 1 of the slide reward: static markup properties, read from the HTML source alone.

Checks, in the order of the GLM-5 report: the document is valid HTML (html5lib, the WHATWG
parser, reports every parse error); the declared CSS (every `<style>` block, including @media
blocks, and every inline `style=""`, parsed with tinycss2) keeps font sizes, colours, spacing
and line height within the task's design rules; images come only from the task's asset list and
each is used once (a `src` outside the list is an invented image, a second use a duplicate;
CSS `url(...)` counts too). Problems are attributed to the slide (`<section class="slide">`)
holding the element; `<style>` rules apply to every slide.

Simplifications: relative lengths are converted with fixed bases (1em = the rule's own
font-size or 16px, 1rem = 16px, % of width = 1280px, vw/vh of the slide); horizontal margins
declared `auto` are fine. The computed values a browser resolves are checked at runtime level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import html5lib
import tinycss2
import tinycss2.color3

from arcforge.world.tasks.slide_decks import DesignRules

COLOR_PROPS = re.compile(
    r"^(color|background(-color)?|border(-(top|right|bottom|left))?(-color)?"
    r"|outline(-color)?|text-decoration(-color)?|fill|stroke|box-shadow"
    r"|text-shadow|caret-color|column-rule(-color)?)$"
)
SPACING_PROPS = re.compile(
    r"^(margin|padding)(-(top|right|bottom|left|block|inline))?$|^(row-|column-)?gap$"
)
HTML_PENALTY, RULE_PENALTY, IMAGE_PENALTY = 0.1, 0.1, 0.35
_FENCE = re.compile(r"```(?:html)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass
class StaticReport:
    """Static findings. `slides[i]` lists problems of slide i; `deck` those of every slide."""

    n_slides: int
    html_errors: list[str] = field(default_factory=list)
    deck: list[str] = field(default_factory=list)
    slides: list[list[str]] = field(default_factory=list)
    images: dict[str, int] = field(default_factory=dict)  # src -> uses
    image_problems: list[list[str]] = field(default_factory=list)  # per slide

    def slide_score(self, i: int) -> float:
        """1 minus penalties: HTML errors (0.1 each, at most 0.5), rule violations (0.1 each,
        at most 0.6) and invented / duplicated images (0.35 each), floored at 0."""
        html_pen = min(0.5, HTML_PENALTY * len(self.html_errors))
        rule_pen = min(0.6, RULE_PENALTY * (len(self.deck) + len(self.slides[i])))
        image_pen = IMAGE_PENALTY * len(self.image_problems[i])
        return max(0.0, 1.0 - html_pen - rule_pen - image_pen)


def extract_html(reply: str) -> str:
    """The HTML document in a reply: a ```html fence, else <!DOCTYPE/<html ... </html>, else all."""
    fence = _FENCE.search(reply)
    if fence:
        return fence.group(1)
    low = reply.lower()
    start = min([i for i in (low.find("<!doctype"), low.find("<html")) if i >= 0], default=0)
    end = low.rfind("</html>")
    return reply[start : end + len("</html>")] if end > start else reply[start:]


def _px(tok: Any, font_px: float, axis: float = 1280.0) -> float | None:
    """A CSS length token in px (None for non-lengths)."""
    if tok.type == "number" and tok.value == 0:
        return 0.0
    if tok.type == "percentage":
        return tok.value / 100 * axis
    if tok.type != "dimension":
        return None
    scale = {
        "px": 1.0,
        "pt": 4 / 3,
        "em": font_px,
        "rem": 16.0,
        "vw": 12.8,
        "vh": 7.2,
        "cm": 96 / 2.54,
        "mm": 96 / 25.4,
        "in": 96.0,
        "ch": font_px / 2,
        "ex": font_px / 2,
    }
    unit = tok.unit.lower()
    return tok.value * scale[unit] if unit in scale else None


def _values(tokens: list[Any]) -> list[Any]:
    """Significant tokens, with function arguments (gradients, rgb()) flattened in."""
    out = []
    for t in tokens:
        if t.type in ("whitespace", "comment"):
            continue
        out.append(t)
        if t.type == "function" and t.lower_name != "url":
            out += _values(t.arguments)
    return out


class _Checker:
    """Collects design-rule violations of declaration lists."""

    def __init__(self, rules: DesignRules) -> None:
        self.rules = rules
        self.palette = {self._hex(tinycss2.color3.parse_color(c)) for c in rules.palette}
        self.urls: list[str] = []

    @staticmethod
    def _hex(rgba: Any) -> str:
        return "#" + "".join(f"{round(c * 255):02x}" for c in rgba[:3])

    def declarations(self, decls: list[Any], where: str) -> list[str]:
        decls = [d for d in decls if d.type == "declaration"]
        font = next((d for d in decls if d.lower_name == "font-size"), None)
        size = (
            next((_px(t, 16.0) for t in _values(font.value) if _px(t, 16.0)), 16.0)
            if font
            else 16.0
        )
        problems: list[str] = []
        for d in decls:
            problems += self._one(d.lower_name, _values(d.value), size, where)
        return problems

    def _one(self, name: str, vals: list[Any], size: float, where: str) -> list[str]:
        r, out = self.rules, []
        self.urls += [t.value for t in vals if t.type == "url"]
        self.urls += [
            t.arguments[0].value
            for t in vals
            if t.type == "function"
            and t.lower_name == "url"
            and t.arguments
            and hasattr(t.arguments[0], "value")
        ]
        if name in ("font-size", "font"):
            lengths = [
                p for t in vals[:1] if name == "font-size" and (p := _px(t, 16.0)) is not None
            ]
            if name == "font":  # the size is the first length before an optional "/line-height"
                lengths = [p for t in vals if (p := _px(t, 16.0)) is not None][:1]
            out += [
                f"{where}: font-size {p:g}px outside {r.font_px[0]}-{r.font_px[1]}px"
                for p in lengths
                if not r.font_px[0] <= p <= r.font_px[1]
            ]
        if COLOR_PROPS.match(name):
            for t in vals:
                rgba = tinycss2.color3.parse_color(t) if t.type != "url" else None
                if rgba is None or rgba == "currentColor" or rgba.alpha == 0:
                    continue
                if self._hex(rgba) not in self.palette:
                    out.append(
                        f"{where}: colour {tinycss2.serialize([t])} in {name} is not in the palette"
                    )
        if SPACING_PROPS.match(name):
            lengths = [p for t in vals if (p := _px(t, size)) is not None]
            out += [
                f"{where}: {name} {p:g}px exceeds {r.max_spacing_px}px"
                for p in lengths
                if abs(p) > r.max_spacing_px
            ]
        if name == "line-height" and vals:
            t = vals[0]
            ratio = t.value if t.type == "number" else (_px(t, size, axis=size) or 0) / size
            if ratio > r.max_line_height:
                out.append(f"{where}: line-height {ratio:.2f}x exceeds {r.max_line_height}x")
        if name in ("letter-spacing", "word-spacing") and vals:
            p = _px(vals[0], size)
            if p is not None and p > 0.3 * size:
                out.append(f"{where}: {name} {p:g}px stretches the text")
        return out

    def stylesheet(self, css: str) -> list[str]:
        problems = []
        for rule in tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True):
            if rule.type == "qualified-rule":
                sel = " ".join(tinycss2.serialize(rule.prelude).split())
                decls = tinycss2.parse_declaration_list(
                    rule.content, skip_comments=True, skip_whitespace=True
                )
                problems += self.declarations(decls, f"<style> {sel}")
            elif rule.type == "at-rule" and rule.content is not None:
                problems += self.stylesheet(tinycss2.serialize(rule.content))
            elif rule.type == "error":
                problems.append(f"<style>: CSS parse error: {rule.message}")
        return problems


def _slide_of(doc: Any) -> list[tuple[Any, int | None]]:
    """Every element with the index of the slide holding it (None outside slides)."""
    out: list[tuple[Any, int | None]] = []
    count = 0

    def walk(el: Any, slide: int | None) -> None:
        nonlocal count
        if el.tag == "section" and "slide" in (el.get("class") or "").split() and slide is None:
            slide, count = count, count + 1
        out.append((el, slide))
        for child in el:
            if isinstance(child.tag, str):
                walk(child, slide)

    walk(doc, None)
    return out


def _norm_src(src: str) -> str:
    return src.strip().removeprefix("./").lstrip("/")


def static_check(doc_html: str, assets: list[dict[str, Any]], rules: DesignRules) -> StaticReport:
    """Run every static check on a deck; see the module docstring."""
    parser = html5lib.HTMLParser(strict=False, namespaceHTMLElements=False)
    doc = parser.parse(doc_html)
    errors = [f"line {pos[0]} col {pos[1]}: {code}" for pos, code, _ in parser.errors]
    elements = _slide_of(doc)
    n = sum(
        1
        for el, s in elements
        if s is not None and el.tag == "section" and "slide" in (el.get("class") or "").split()
    )
    rep = StaticReport(
        n, errors, slides=[[] for _ in range(n)], image_problems=[[] for _ in range(n)]
    )
    check = _Checker(rules)
    allowed = {_norm_src(a["src"]) for a in assets}
    for el, slide in elements:
        bucket = rep.deck if slide is None else rep.slides[slide]
        if el.tag == "style":
            rep.deck += check.stylesheet(el.text or "")
        if el.get("style"):
            decls = tinycss2.parse_declaration_list(
                el.get("style"), skip_comments=True, skip_whitespace=True
            )
            bucket += check.declarations(decls, f"<{el.tag} style>")
        srcs = [el.get("src")] if el.tag in ("img", "image", "input") and el.get("src") else []
        srcs += [el.get("href")] if el.tag == "image" and el.get("href") else []
        srcs += check.urls
        check.urls = []
        for src in srcs:
            _use_image(rep, _norm_src(src), allowed, slide)
    return rep


def _use_image(rep: StaticReport, src: str, allowed: set[str], slide: int | None) -> None:
    rep.images[src] = rep.images.get(src, 0) + 1
    targets = rep.image_problems if slide is None else [rep.image_problems[slide]]
    label = src if len(src) <= 60 else src[:57] + "..."
    if src not in allowed:
        problem = f"invented image {label!r} (not in the asset list)"
    elif rep.images[src] > 1:
        problem = f"duplicated image {label!r} (use {rep.images[src]})"
    else:
        return
    for t in targets:
        t.append(problem)
