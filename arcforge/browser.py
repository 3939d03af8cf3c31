"""Headless Chromium through Playwright: one browser per process, launched once, reused.

Slide rewards and the front-end judge both render pages in a real browser. Launching Chromium
costs about a second, so the process keeps one browser for its lifetime, owned by one daemon
thread ("arcforge-browser"). Playwright's sync API is bound to the thread that started it and
refuses to run inside an asyncio loop, so callers never touch it directly: `run_in_browser(fn)`
runs `fn(browser)` on the browser thread and returns its result (calls from any thread, an
async web handler included, are served one at a time). A `Browser` can also be made and used
directly by a single thread (benchmarks do, to compare with launching per render).

`fresh_page()` opens a new page in its own context (no state shared with earlier pages: what the
front-end judge needs); `kept_page()` hands out one page per viewport setting that stays open
between uses (its routes are cleared each time), which saves the renderer-process start
(0.3-2 s on a busy 2-core machine) for script-free renders such as slides.

We never run `playwright install` (no downloads): the browser is Debian's `chromium`, found on
PATH (or `$ARCFORGE_CHROMIUM`) and launched with `executable_path` and
`--no-sandbox --headless`. Missing pieces raise `BrowserUnavailable` (a UserError) naming what is
missing and how to install it; tests use `browser_missing()` to skip with that reason.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from arcforge.errors import UserError

T = TypeVar("T")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--hide-scrollbars",
    "--font-render-hinting=none",
]
_LOCAL = threading.local()  # each thread's Playwright driver


class BrowserUnavailable(UserError):
    """Playwright or the chromium binary is missing; the message says how to install it."""


def chromium_path() -> str:
    """The chromium executable: $ARCFORGE_CHROMIUM, else `chromium` / `chromium-browser` on PATH.

    Raises:
        BrowserUnavailable: when none is found.
    """
    override = os.environ.get("ARCFORGE_CHROMIUM")
    if override:
        if not os.access(override, os.X_OK):
            raise BrowserUnavailable(f"$ARCFORGE_CHROMIUM={override} is not an executable file")
        return override
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserUnavailable("no chromium on PATH; install it with `apt-get install -y chromium`")


def browser_missing() -> str | None:
    """Why a browser cannot be launched here (None when playwright and chromium are present)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install 'arcforge[browser]')"
    try:
        chromium_path()
    except BrowserUnavailable as err:
        return str(err)
    return None


@dataclass
class BrowserStats:
    """Launches and page uses of one browser (for the ms-per-render figure)."""

    launches: int = 0
    launch_ms: float = 0.0
    pages: int = 0
    page_ms: float = 0.0

    @property
    def ms_per_page(self) -> float:
        return self.page_ms / self.pages if self.pages else 0.0


def _driver() -> Any:
    """This thread's Playwright driver (Playwright allows one sync driver per thread)."""
    pw = getattr(_LOCAL, "driver", None)
    if pw is None:
        from playwright.sync_api import sync_playwright

        pw = _LOCAL.driver = sync_playwright().start()
    return pw


class Browser:
    """One Chromium process, usable only from the thread that launched it."""

    def __init__(self) -> None:
        reason = browser_missing()
        if reason:
            raise BrowserUnavailable(reason)
        t0 = time.perf_counter()
        self.stats = BrowserStats()
        try:
            self._browser = _driver().chromium.launch(
                executable_path=chromium_path(), args=CHROMIUM_ARGS
            )
        except Exception as err:
            raise BrowserUnavailable(f"chromium failed to launch: {err}") from err
        self.thread = threading.get_ident()
        self._kept: dict[tuple, Any] = {}
        self.stats.launches = 1
        self.stats.launch_ms = (time.perf_counter() - t0) * 1000

    def _context(self, width: int, height: int, javascript: bool, scale: float) -> Any:
        if threading.get_ident() != self.thread:
            raise RuntimeError("a Browser is bound to the thread that launched it")
        return self._browser.new_context(
            viewport={"width": width, "height": height},
            java_script_enabled=javascript,
            device_scale_factor=scale,
        )

    @contextmanager
    def fresh_page(
        self, width: int = 1280, height: int = 720, javascript: bool = True, scale: float = 1.0
    ) -> Iterator[Any]:
        """A new page in its own context (no shared cookies or storage); closed on exit.

        Args:
            width, height: the viewport in CSS pixels.
            javascript: False renders without running the page's scripts (our own
                `page.evaluate` still works).
            scale: device scale factor (screenshots are width*scale x height*scale).
        """
        t0 = time.perf_counter()
        ctx = self._context(width, height, javascript, scale)
        try:
            yield ctx.new_page()
        finally:
            ctx.close()
            self.stats.pages += 1
            self.stats.page_ms += (time.perf_counter() - t0) * 1000

    @contextmanager
    def kept_page(
        self, width: int = 1280, height: int = 720, javascript: bool = True, scale: float = 1.0
    ) -> Iterator[Any]:
        """A page kept open for reuse with these settings; navigate it before use.

        Routes are removed after each use; a use that raises closes the page (the next use
        opens a new one), so a broken page never leaks into the next render.
        """
        key = (width, height, javascript, scale)
        t0 = time.perf_counter()
        page = self._kept.get(key)
        if page is None or page.is_closed():
            page = self._kept[key] = self._context(width, height, javascript, scale).new_page()
        try:
            yield page
        except BaseException:
            self._kept.pop(key, None)
            page.context.close()
            raise
        else:
            page.unroute_all(behavior="ignoreErrors")
        finally:
            self.stats.pages += 1
            self.stats.page_ms += (time.perf_counter() - t0) * 1000

    def close(self) -> None:
        self._kept.clear()
        self._browser.close()


class _BrowserThread:
    """The daemon thread that owns the process's browser and runs submitted calls in order."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self.browser: Browser | None = None
        self.thread = threading.Thread(target=self._loop, name="arcforge-browser", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _loop(self) -> None:
        try:
            self.browser = Browser()
        except BaseException as err:  # reported to the caller that started the thread
            self.error = err
            self._ready.set()
            return
        self._ready.set()
        while (job := self._jobs.get()) is not None:
            fn, fut = job
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(self.browser))
                except BaseException as err:  # the caller re-raises it
                    fut.set_exception(err)
        self.browser.close()
        _driver().stop()

    def run(self, fn: Callable[[Browser], T]) -> T:
        if threading.get_ident() == self.thread.ident:  # nested call from a running job
            return fn(self.browser)
        fut: Future = Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def stop(self, timeout: float = 10.0) -> None:
        if self.thread.is_alive():
            self._jobs.put(None)
            self.thread.join(timeout)


_WORKER: _BrowserThread | None = None
_WORKER_LOCK = threading.Lock()


def run_in_browser(fn: Callable[[Browser], T]) -> T:
    """Run `fn(browser)` on the process's browser thread (launched on first use) and return
    its result; exceptions raised by `fn` are re-raised here.

    Raises:
        BrowserUnavailable: playwright or chromium is missing, or chromium failed to launch.
    """
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or not _WORKER.thread.is_alive():
            worker = _BrowserThread()
            if worker.error is not None:
                raise worker.error
            _WORKER = worker
    return _WORKER.run(fn)


def browser_stats() -> BrowserStats | None:
    """The shared browser's stats (None before its first use)."""
    return _WORKER.browser.stats if _WORKER is not None and _WORKER.browser else None


@atexit.register
def close_browser() -> None:
    """Close the shared browser (the next `run_in_browser` launches a new one)."""
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is not None:
            _WORKER.stop()
            _WORKER = None
