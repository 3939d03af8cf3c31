"""Progress bars: a loop inside another's bar (the dev probe inside agentic RL) gets its own row;
rich allows one live display, so a second one would raise."""

import io

from rich.console import Console

import arcforge.progress as P


def test_nested_bars_share_one_live_display(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(P, "_console", Console(file=out, force_terminal=True, width=100))
    monkeypatch.setenv("ARCFORGE_PROGRESS", "1")
    with P.progress(2, "outer") as a:
        for i in range(2):
            with P.progress(3, "inner") as b:
                assert b.bar is a.bar  # joined the outer display
                b.update(3, tool=0.5)
                b.bar.refresh()  # draw now (rich redraws 10 times a second)
            assert len(a.bar.tasks) == 1  # the inner row is gone again
            a.update(i + 1)
    assert P._active is None
    text = out.getvalue()
    assert "outer" in text and "inner" in text and "tool=0.5" in text
