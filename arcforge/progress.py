"""Progress bars with ETA for every long loop (rich), quiet when not attached to a terminal.

`progress(total, desc)` yields a small handle with `update(completed, **metrics)`. On a
terminal it draws a rich bar with elapsed time, ETA and the latest metrics; otherwise (CI, tests,
log files) it prints one plain line every ~10% so logs stay short but show life.
Set ARCFORGE_PROGRESS=0 to silence it entirely.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_console = Console(stderr=True)
_active: Progress | None = None  # the live bar, which nested loops join (rich allows one)


class _Handle:
    def __init__(self, total: int, desc: str, start: int, bar: Progress | None):
        self.total, self.desc, self.bar = max(1, total), desc, bar
        self.task = bar.add_task(desc, total=self.total, completed=start, info="") if bar else None
        self.next_print = start + self.total / 10
        self.t0 = time.time()

    def update(self, completed: int, **metrics: float) -> None:
        info = " ".join(f"{k}={v:.4g}" for k, v in metrics.items() if v == v)
        if self.bar is not None:
            self.bar.update(self.task, completed=completed, info=info)
        elif os.environ.get("ARCFORGE_PROGRESS", "1") != "0" and (
            completed >= self.next_print or completed == self.total
        ):
            self.next_print = completed + self.total / 10
            el = time.time() - self.t0
            print(f"  {self.desc}: {completed}/{self.total} {info} [{el:.0f}s]", file=sys.stderr)


@contextmanager
def progress(total: int, desc: str, start: int = 0) -> Iterator[_Handle]:
    """A progress handle for a loop of `total` items, starting at `start` (resume)."""
    global _active
    if os.environ.get("ARCFORGE_PROGRESS", "1") == "0" or not _console.is_terminal:
        yield _Handle(total, desc, start, None)
        return
    if _active is not None:  # inside another bar (a probe within a training loop): a second row
        handle = _Handle(total, desc, start, _active)
        try:
            yield handle
        finally:
            _active.remove_task(handle.task)
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=_console,
        transient=False,
    )
    with bar:
        _active = bar
        try:
            yield _Handle(total, desc, start, bar)
        finally:
            _active = None
