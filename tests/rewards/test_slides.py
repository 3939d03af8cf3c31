"""The slide reward: static checks and whitespace on hand-made inputs, then real Chromium renders
ranking a clean deck above decks with planted hacks (the issue's acceptance test)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from arcforge.browser import browser_missing
from arcforge.rewards.slides import coverage, deck_reward, slide_scores
from arcforge.rewards.slides_static import extract_html, static_check
from arcforge.rewards.slides_visual import whitespace
from arcforge.world.knowledge.kb import build_kb
from arcforge.world.knowledge.names import NameBank
from arcforge.world.tasks.slide_decks import DesignRules, reference_deck, slides_tasks

RULES = DesignRules(font_px=(16, 64), palette=["#ffffff", "#111111"], max_spacing_px=72)
DOC = """<!DOCTYPE html><html><head><title>t</title><style>
h1 { font-size: 5em; color: #123456; }
p { margin: 0 auto 80px; line-height: 2; background: url(assets/b.png); }
</style></head><body>
<section class="slide"><h1 style="color: rgb(17,17,17)">A</h1>
<img src="assets/a.png"><img src="./assets/a.png"></section>
<section class="slide"><p style="font-size: 12px">B</p><img src="https://x.example/c.png"></section>
</body></html>"""
ASSETS = [{"src": "assets/a.png"}, {"src": "assets/b.png"}]


def test_static_checks_name_each_violation():
    rep = static_check(DOC, ASSETS, RULES)
    assert rep.n_slides == 2 and rep.html_errors == []
    joined = " | ".join(rep.deck)
    assert "font-size 80px outside 16-64px" in joined  # 5em = 5 x 16px
    assert "colour #123456 in color is not in the palette" in joined
    assert "margin 80px exceeds 72px" in joined  # `auto` is fine, 80px is not
    assert "line-height 2.00x exceeds 1.8x" in joined
    assert len(rep.deck) == 4 and rep.slides[0] == []  # rgb(17,17,17) == #111111 is allowed
    assert rep.slides[1] == ["<p style>: font-size 12px outside 16-64px"]
    assert rep.image_problems[0] == ["duplicated image 'assets/a.png' (use 2)"]
    assert rep.image_problems[1] == [
        "invented image 'https://x.example/c.png' (not in the asset list)"
    ]
    assert rep.images == {"assets/b.png": 1, "assets/a.png": 2, "https://x.example/c.png": 1}
    # slide 0: 1 - 0.1*4 (deck rules) - 0.35 (duplicate) = 0.25
    # slide 1: 1 - 0.1*5 (4 deck + 1 inline) - 0.35 (invented) = 0.15
    assert rep.slide_score(0) == pytest.approx(0.25)
    assert rep.slide_score(1) == pytest.approx(0.15)


@pytest.mark.parametrize(
    "value,flagged",
    [
        ("250%", True),
        ("150%", False),
        ("2", True),
        ("40px", True),
        ("normal", False),
        ("1.5em", False),
    ],
)
def test_line_height_forms(value, flagged):
    # font-size 20px: 250% = 2.5x, 40px = 2x, 1.5em = 1.5x; the rule allows 1.8x
    doc = f"<!DOCTYPE html><title>x</title><style>p {{ font-size: 20px; line-height: {value} }}</style>"
    assert bool(static_check(doc, [], RULES).deck) == flagged


def test_invalid_html_is_counted():
    rep = static_check("<html><body><section class='slide'><div></section>", [], RULES)
    codes = " ".join(rep.html_errors)
    assert "expected-doctype-but-got-start-tag" in codes and "end-tag-too-early" in codes
    assert rep.slide_score(0) == pytest.approx(1 - 0.1 * len(rep.html_errors))


def test_extract_html_takes_the_fence_or_the_document():
    assert extract_html("Here:\n```html\n<p>x</p>\n```\nbye") == "<p>x</p>\n"
    assert extract_html("Sure! <!DOCTYPE html><html><p>y</p></html> done") == (
        "<!DOCTYPE html><html><p>y</p></html>"
    )


def _dots() -> np.ndarray:
    img = np.full((72, 128, 3), 255, np.uint8)
    for y in (10, 34, 58):
        for x in (14, 46, 78, 110):
            img[y : y + 4, x : x + 4] = 0
    return img


def test_whitespace_balanced_blank_and_top_heavy():
    assert whitespace(np.full((72, 128, 3), 255, np.uint8)).score == 0.0
    # dots in every grid cell: longest blank band 20/72 rows, 28/128 cols, no blank cell,
    # centre of mass (63.5/128, 35.5/72) ~ centre -> no penalty
    ws = whitespace(_dots())
    assert ws.band_rows == pytest.approx(20 / 72) and ws.band_cols == pytest.approx(28 / 128)
    assert ws.blank_cells == 0.0 and ws.score == 1.0
    top = np.full((72, 128, 3), 255, np.uint8)
    top[4:20, 8:120] = 0
    ws = whitespace(top)
    # band 52/72=.7222 -> .4*(.7222-.4)/.35=.36825; blank 8/12 -> .3*(.6667-.5)/.4=.125;
    # offset |11.5/72-.5|=.3403 -> .3*(.3403-.25)/.2=.13542; score = 1-.62867 = .37133
    assert ws.score == pytest.approx(0.37133, abs=1e-4)


def test_coverage_counts_title_and_bullets():
    slide = {"title": "Key facts", "bullets": ["Ada was born in Rome", "Ada works as a pilot"]}
    assert coverage(slide, "KEY FACTS\nAda was born in Rome\nAda works as a pilot") == 1.0
    assert coverage(slide, "Key facts. Ada was born in Rome.") == 0.75  # .5 + .5 * 1/2
    assert coverage(slide, "nothing relevant") == 0.0


# ---- real Chromium -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def renderer():
    if browser_missing():
        pytest.skip(f"needs a browser: {browser_missing()}")
    from arcforge.rewards.slides_render import SlideRenderer

    return SlideRenderer()  # this thread's shared browser: launched once for the module


@pytest.fixture(scope="module")
def task():
    rng = random.Random(0)
    kb = build_kb(rng, NameBank(rng), 60, 12, 12, 30, 0.0)  # a small world KB, built in ~20 ms
    return slides_tasks(kb, 2, 0, seed=0)[0][1]


def _hacks(clean: str, asset: str) -> dict[str, str]:
    extra = "".join(
        f"<li>Extra point {i} that keeps going to fill the page</li>" for i in range(10)
    )
    cut = clean.find("</ul>")
    last = clean.rfind('<section class="slide">')
    head, tail = clean[:last], clean[last + len('<section class="slide">') :]

    def css(rule: str, deck: str) -> str:
        return deck.replace("</style>", rule + "\n</style>")

    hidden = clean.replace(".slide {", ".slide { overflow: hidden;", 1)
    blank = tail.replace('<div class="row">', "<div>", 1)
    return {
        "visible_overflow": clean[:cut] + extra + clean[cut:],
        "hidden_overflow": hidden[: hidden.find("</ul>")] + extra + hidden[hidden.find("</ul>") :],
        "stretched_spacing": css(".fill li { margin-bottom: 110px; line-height: 2.6; }", head)
        + '<section class="slide fill">'
        + tail,
        "blank_regions": css(".top h2 { font-size: 22px; } .top ul { font-size: 16px; }", head)
        + '<section class="slide top">'
        + blank,
        "invented_image": clean.replace(asset, "assets/made-up-picture.png"),
        "duplicated_image": clean[: clean.rfind("</ul>") + 5]
        + f'<img src="{asset}" alt="x">'
        + clean[clean.rfind("</ul>") + 5 :],
    }


def test_clean_deck_beats_every_planted_hack(renderer, task):
    clean = reference_deck(task)
    base = deck_reward(clean, task, renderer)
    assert base.score >= 0.95, base.details
    assert base.details["content"] == 1.0 and base.details["runtime"] == 1.0
    scores = {}
    for name, deck in _hacks(clean, task.context["assets"][0]["src"]).items():
        r = deck_reward(deck, task, renderer)
        scores[name] = r.score
        problems = " | ".join(p for s in r.details["per_slide"] for p in s["problems"])
        assert r.score < base.score, (name, r.score, base.score, problems)
        expected = {
            "visible_overflow": "overflow the slide",
            "hidden_overflow": "overflow hidden",
            "stretched_spacing": "stretched spacing",
            "blank_regions": "unbalanced whitespace",
            "invented_image": "invented image",
            "duplicated_image": "duplicated image",
        }
        assert expected[name] in problems, (name, problems)
    # hiding the overflow must cost more than showing it
    assert scores["hidden_overflow"] < scores["visible_overflow"]
    assert renderer.ms_per_render > 0 and base.details["render_ms"] > 0
    print(
        f"\nslide render: {renderer.ms_per_render:.0f} ms per deck over {renderer.renders} decks; "
        f"scores {', '.join(f'{k}={v:.3f}' for k, v in scores.items())} clean={base.score:.3f}"
    )


def test_reply_without_slides_scores_zero_without_rendering(renderer, task):
    before = renderer.renders
    r = deck_reward("I cannot make slides.", task, renderer)
    assert r.score == 0.0 and "no <section" in r.details["problems"][0]
    assert renderer.renders == before and slide_scores(r) == []


def test_missing_slides_count_as_zero_even_from_an_event_loop_thread(renderer, task):
    import asyncio
    import threading

    from arcforge.browser import browser_stats

    clean = reference_deck(task)
    short = clean[: clean.rfind('<section class="slide">')] + "</body></html>"
    out = {}

    async def in_loop():  # e.g. an async web handler: Playwright's sync API alone would refuse
        out["r"] = deck_reward(short, task, renderer)

    t = threading.Thread(target=lambda: asyncio.run(in_loop()))
    t.start()
    t.join()
    r, n = out["r"], len(task.context["outline"])
    assert r.details["n_slides"] == n - 1
    assert r.score == pytest.approx(sum(slide_scores(r)) / n)  # the missing slide adds 0
    assert browser_stats().launches == 1  # one browser for every thread of the process
