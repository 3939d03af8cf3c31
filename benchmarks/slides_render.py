"""Slide-reward rendering: one reused browser vs launching Chromium for every deck.

The same decks (the world's reference decks, 3-4 slides each) are scored three ways in one run:
    kept     one browser per process, one kept page reused across renders (the default)
    fresh    one browser per process, a new page and context per render
    launch   a new Chromium process per render (the naive reference)
Each round scores one deck with every way back to back (paired, so load from other processes on
a shared machine hits all three alike); the result is the median per-round ratio launch / kept.
Milliseconds per render are the full `deck_reward` (static + render + visual).

    .venv/bin/python benchmarks/slides_render.py [--quick]
Last line: `result: speedup=<launch ms / kept ms>`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from arcforge.browser import Browser
from arcforge.rewards.slides import deck_reward
from arcforge.rewards.slides_render import SlideRenderer
from arcforge.world.knowledge.kb import build_kb
from arcforge.world.knowledge.names import NameBank
from arcforge.world.tasks.slide_decks import reference_deck, slides_tasks


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds instead of 10")
    args = ap.parse_args()
    rounds = 3 if args.quick else 10
    rng = random.Random(0)
    tasks = slides_tasks(build_kb(rng, NameBank(rng), 80, 16, 16, 40, 0.0), rounds, 0)[0]
    decks = [(t, reference_deck(t)) for t in tasks]
    shared = Browser()  # this thread's: launch_each below runs on the same thread
    kept = SlideRenderer(shared)
    fresh = SlideRenderer(shared, fresh=True)
    deck_reward(decks[0][1], decks[0][0], kept)  # warm-up: launch and first page
    deck_reward(decks[0][1], decks[0][0], fresh)

    def launch_each(task, deck) -> None:
        browser = Browser()
        try:
            deck_reward(deck, task, SlideRenderer(browser))
        finally:
            browser.close()

    ms: dict[str, list[float]] = {"kept": [], "fresh": [], "launch": []}
    for task, deck in decks:
        ms["kept"].append(timed(lambda t=task, d=deck: deck_reward(d, t, kept)))
        ms["fresh"].append(timed(lambda t=task, d=deck: deck_reward(d, t, fresh)))
        ms["launch"].append(timed(lambda t=task, d=deck: launch_each(t, d)))
    for name, xs in ms.items():
        print(f"{name:7s} median {statistics.median(xs):7.0f} ms per render  ({len(xs)} decks)")
    ratio = statistics.median(la / k for la, k in zip(ms["launch"], ms["kept"]))
    fresh_ratio = statistics.median(f / k for f, k in zip(ms["fresh"], ms["kept"]))
    print(f"fresh page / kept page: {fresh_ratio:.2f}x")
    print(f"result: speedup={ratio:.2f}")


if __name__ == "__main__":
    main()
