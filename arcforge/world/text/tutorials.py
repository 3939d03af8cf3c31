"""How-to web pages for terminal synthesis's web-page route, written from the world's tasks.

The world's pages (arcforge.world.knowledge.pages) are encyclopedia-style: none has the three code blocks
and numbered steps the web-page route keeps (`page_is_tutorial`). These pages are what a
tutorial site would hold for the world's shell task families: set up the example files, run
the command, check the result, each step a ```bash block taken from a TRAIN terminal task
(its init script, reference solution and verify script). They are not part of the
pretraining corpus: only synthesis reads them, so adding them changes no model.
"""

from __future__ import annotations

from typing import Any


def tutorial_pages(world: Any, n: int) -> list[dict[str, str]]:
    """Up to `n` pages {"url", "title", "text"}, one per TRAIN terminal task family (then more
    tasks of the families already used, in task order)."""
    tasks = [t for t in world.tasks("terminal", "train") if t.metadata.get("solution")]
    firsts: dict[str, Any] = {}
    for t in tasks:
        firsts.setdefault(str(t.metadata.get("family")), t)
    order = list(firsts.values()) + [t for t in tasks if t not in firsts.values()]
    pages = []
    for t in order[:n]:
        goal = t.instruction.rstrip(".")
        setup = (t.context.get("init_script") or "").strip() or "ls -la"
        check = (t.validation.verify_script or "").strip() or "ls -la"
        text = (
            f"# How to: {goal}\n\n"
            f"This page shows, on a small example, how to {goal[0].lower() + goal[1:]}.\n\n"
            f"Step 1. Create the example files:\n\n```bash\n{setup}\n```\n\n"
            f"Step 2. Run the command:\n\n```bash\n{t.metadata['solution'].strip()}\n```\n\n"
            f"Step 3. Check the result (exit code 0 means it worked):\n\n```bash\n{check}\n```\n"
        )
        family = t.metadata.get("family") or "task"
        pages.append(
            {
                "url": f"https://howto.world/{family}/{t.id}",
                "title": f"How to: {goal}",
                "text": text,
            }
        )
    return pages
