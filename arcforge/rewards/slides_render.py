"""Level 2 of the slide reward: render the deck in headless Chromium and measure it.

The deck is served from a fake origin through Playwright request routing: the document itself,
a generated picture (of the declared size) for each listed asset, 404 for any other path of that
origin, and every other request aborted, so a render never touches the network. Scripts are off
(`java_script_enabled=False`): the page is judged as markup and CSS; our own measuring script
still runs through `page.evaluate`.

Per slide (`section.slide`) the measuring script returns the box (should be 1280x720), its
rendered text, every descendant box that sticks out of it (overflow), every element that hides
overflowing content (`overflow` other than visible with scrollWidth/Height beyond the client
size: the "hide what does not fit" cheat), computed spacing beyond the design rules (vertical
margins, paddings, gaps, line-height / font-size, letter-spacing: the "stretch to fill" cheat)
and text smaller than the minimum font. One full-page screenshot is cropped per slide for the
visual level. One browser per process is reused (arcforge.browser); renders reuse one kept page
(routes reset, a new document each time; scripts are off so nothing survives a render), or a
fresh page per render with `fresh=True`.
"""

from __future__ import annotations

import io
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from arcforge.browser import Browser, run_in_browser
from arcforge.world.tasks.slide_decks import DesignRules

ORIGIN = "http://slides.arcforge.invalid"
MAX_SLIDES = 40  # a deck longer than this is cut before the screenshot

_MEASURE = """(cfg) => {
  const px = v => parseFloat(v) || 0;
  const tag = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string'
      ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const out = [];
  for (const s of [...document.querySelectorAll('section.slide')].slice(0, cfg.max_slides)) {
    const r = s.getBoundingClientRect();
    const res = {x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height,
                 text: s.innerText || '', overflow: [], clipped: [], spacing: [], small: []};
    for (const el of [s, ...s.querySelectorAll('*')]) {
      const cs = getComputedStyle(el);
      if (cs.display === 'none') continue;
      const b = el.getBoundingClientRect();
      if (el !== s && b.width > 0 && b.height > 0) {
        const over = Math.max(r.left - b.left, r.top - b.top, b.right - r.right, b.bottom - r.bottom);
        if (over > 1) res.overflow.push({el: tag(el), px: Math.round(over)});
      }
      const hidden = Math.max(el.scrollWidth - el.clientWidth, el.scrollHeight - el.clientHeight);
      if ((cs.overflowX !== 'visible' || cs.overflowY !== 'visible') && hidden > 1)
        res.clipped.push({el: tag(el), px: hidden, overflow: cs.overflowY});
      const fs = px(cs.fontSize);
      const text = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (text && fs < cfg.min_font) res.small.push({el: tag(el), px: fs});
      for (const p of cfg.spacing_props) {
        const v = Math.abs(px(cs[p]));
        if (v > cfg.max_spacing) res.spacing.push({el: tag(el), prop: p, px: Math.round(v)});
      }
      if (text && fs > 0) {
        const lh = cs.lineHeight === 'normal' ? 1.2 * fs : px(cs.lineHeight);
        if (lh / fs > cfg.max_line_height)
          res.spacing.push({el: tag(el), prop: 'lineHeight', ratio: +(lh / fs).toFixed(2)});
        if (px(cs.letterSpacing) > 0.3 * fs)
          res.spacing.push({el: tag(el), prop: 'letterSpacing', px: px(cs.letterSpacing)});
      }
    }
    out.push(res);
  }
  return out;
}"""
SPACING_PROPS = [
    "marginTop",
    "marginBottom",
    "paddingTop",
    "paddingBottom",
    "paddingLeft",
    "paddingRight",
    "rowGap",
    "columnGap",
]


@dataclass
class SlideRender:
    """What the browser measured for one slide; `image` is (H, W, 3) uint8 at render scale."""

    box: tuple[float, float, float, float]  # x, y, w, h in CSS px
    text: str
    overflow: list[dict] = field(default_factory=list)
    clipped: list[dict] = field(default_factory=list)
    spacing: list[dict] = field(default_factory=list)
    small: list[dict] = field(default_factory=list)
    image: np.ndarray | None = field(default=None, repr=False)


@dataclass
class DeckRender:
    slides: list[SlideRender]
    ms: float
    requests: list[str] = field(default_factory=list)  # blocked or unknown URLs the page asked for


_ASSET_CACHE: dict[tuple[str, int, int], bytes] = {}


def asset_png(src: str, width: int, height: int) -> bytes:
    """A deterministic picture for an asset name: a tinted field with a few shapes."""
    key = (src, width, height)
    if key not in _ASSET_CACHE:
        h = zlib.crc32(src.encode())
        base = (60 + h % 150, 60 + (h >> 8) % 150, 60 + (h >> 16) % 150)
        img = Image.new("RGB", (width, height), base)
        draw = ImageDraw.Draw(img)
        for k in range(4):
            x0, y0 = (h >> k) % (width // 2), (h >> (k + 3)) % (height // 2)
            shade = tuple(min(255, c + 40 * (k + 1)) for c in base)
            draw.ellipse([x0, y0, x0 + width // 3, y0 + height // 3], fill=shade)
        buf = io.BytesIO()
        img.save(buf, "PNG")
        _ASSET_CACHE[key] = buf.getvalue()
    return _ASSET_CACHE[key]


class SlideRenderer:
    """Renders decks in the process's shared browser (or a given one).

    Args:
        browser: a Browser owned by the calling thread (default: the shared browser thread,
            launched once per process and usable from any thread).
        scale: device scale factor of the screenshot (0.5 = a quarter of the pixels, plenty for
            whitespace analysis and about twice as fast).
        timeout_ms: page load timeout.
        fresh: a new page (and context) per render instead of the kept page.
    """

    def __init__(
        self,
        browser: Browser | None = None,
        scale: float = 0.5,
        timeout_ms: float = 15000,
        fresh: bool = False,
    ) -> None:
        self.browser = browser
        self.scale, self.timeout_ms, self.fresh = scale, timeout_ms, fresh
        self.renders, self.total_ms = 0, 0.0

    @property
    def ms_per_render(self) -> float:
        return self.total_ms / self.renders if self.renders else 0.0

    def _route(self, page: Any, doc: str, assets: list[dict], asked: list[str]) -> None:
        by_path = {"/" + a["src"].strip().removeprefix("./").lstrip("/"): a for a in assets}

        def handle(route: Any) -> None:
            url = route.request.url
            path = url[len(ORIGIN) :].split("?")[0] if url.startswith(ORIGIN) else None
            if path == "/index.html":
                route.fulfill(body=doc, content_type="text/html; charset=utf-8")
            elif path in by_path:
                a = by_path[path]
                png = asset_png(a["src"], int(a["width"]), int(a["height"]))
                route.fulfill(body=png, content_type="image/png")
            else:
                asked.append(url[:200])
                if path is None:
                    route.abort()
                else:
                    route.fulfill(status=404, body="not found")

        page.route("**/*", handle)

    def render(self, doc: str, assets: list[dict], rules: DesignRules) -> DeckRender:
        """Load `doc`, measure every slide and crop its screenshot."""
        t0 = time.perf_counter()
        if self.browser is not None:
            raw, shot, asked = self._load(self.browser, doc, assets, rules)
        else:
            raw, shot, asked = run_in_browser(lambda b: self._load(b, doc, assets, rules))
        slides = [self._slide(s, shot, rules) for s in raw]
        ms = (time.perf_counter() - t0) * 1000
        self.renders += 1
        self.total_ms += ms
        return DeckRender(slides, ms, asked)

    def _load(
        self, browser: Browser, doc: str, assets: list[dict], rules: DesignRules
    ) -> tuple[list[dict], np.ndarray | None, list[str]]:
        """(measurements, full screenshot (H, W, 3) or None, refused URLs), on the browser's thread."""
        asked: list[str] = []
        cfg = {
            "min_font": rules.font_px[0],
            "max_spacing": rules.max_spacing_px,
            "max_line_height": rules.max_line_height,
            "spacing_props": SPACING_PROPS,
            "max_slides": MAX_SLIDES,
        }
        open_page = browser.fresh_page if self.fresh else browser.kept_page
        with open_page(rules.width, rules.height, javascript=False, scale=self.scale) as page:
            page.set_default_timeout(self.timeout_ms)
            self._route(page, doc, assets, asked)
            page.goto(f"{ORIGIN}/index.html", wait_until="load")
            raw = page.evaluate(_MEASURE, cfg)
            shot = None
            if raw:
                bottom = max(s["y"] + s["h"] for s in raw) + 2 * rules.height
                size = page.evaluate(
                    "() => [document.documentElement.scrollWidth,"
                    " document.documentElement.scrollHeight]"
                )
                clip = {
                    "x": 0,
                    "y": 0,
                    "width": max(size[0], rules.width),
                    "height": min(size[1], bottom),
                }
                png = page.screenshot(full_page=True, clip=clip, animations="disabled")
                shot = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))  # (H, W, 3)
        return raw, shot, asked

    def _slide(self, s: dict, shot: np.ndarray | None, rules: DesignRules) -> SlideRender:
        img = None
        if shot is not None:
            k = self.scale
            x0, y0 = max(0, round(s["x"] * k)), max(0, round(s["y"] * k))
            w, h = round(rules.width * k), round(rules.height * k)  # the slide's nominal frame
            img = shot[y0 : y0 + h, x0 : x0 + w]  # (h, w, 3), smaller at the page edge
        return SlideRender(
            (s["x"], s["y"], s["w"], s["h"]),
            s["text"],
            s["overflow"],
            s["clipped"],
            s["spacing"],
            s["small"],
            img,
        )
