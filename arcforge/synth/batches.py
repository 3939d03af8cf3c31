"""Run a synthesis pipeline in batches until enough records come out, with summed counts.

Producers such as search and ABE synthesis draw many cheap candidates, most of which their
filters drop. Running every candidate through the costly filters (agent runs, LLM calls) would
waste work once enough have been kept, so `run_batches` feeds the pipeline (arcforge.synth.
pipeline) `batch` seeds at a time and stops once `want` records have come out. All batches
share one journal directory, so a rerun resumes every batch from its journals; the counts of
all batches are summed per step (in, out, dropped by reason, resumed, seconds).
`LLMGuard` is the shared policy for LLM calls inside steps (see its docstring).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arcforge.errors import UserError
from arcforge.llm import LLMError
from arcforge.synth.pipeline import Drop, Pipeline, Record, Step, journal_entries


def run_batches(
    steps: list[Step],
    out_dir: Path,
    seeds: Callable[[int, int], list[Record]],
    total: int,
    batch: int,
    want: int | None = None,
    name: str = "synth",
    workers: int = 1,
) -> tuple[list[Record], dict[str, dict[str, Any]]]:
    """Records out of the last step, and per-step counts summed over the batches run.

    Args:
        steps: the pipeline's steps.
        out_dir: journal directory (reuse it to resume).
        seeds: (start, stop) -> the seed records of attempts start..stop-1 (stable ids).
        total: attempts at most; batch: attempts per pipeline run.
        want: stop after the batch that brings the output to this many (None: run all).
    """
    kept: list[Record] = []
    counts: dict[str, dict[str, Any]] = {
        s.name: {"in": 0, "out": 0, "dropped": Counter(), "resumed": 0, "seconds": 0.0}
        for s in steps
    }
    for start in range(0, total, max(1, batch)):
        pipe = Pipeline(steps, out_dir, workers=workers, name=name)
        kept += pipe.run(seeds(start, min(total, start + batch)))
        for s in pipe.summaries:
            c = counts[s.name]
            c["in"], c["out"] = c["in"] + s.n_in, c["out"] + s.n_out
            c["resumed"] += s.resumed
            c["seconds"] = round(c["seconds"] + s.seconds, 3)
            c["dropped"].update(s.dropped)
        if want is not None and len(kept) >= want:
            break
    for c in counts.values():
        c["dropped"] = dict(c["dropped"])
    return kept, counts


def step_outputs(out_dir: Path, step: str) -> list[dict[str, Any]]:
    """The `data` of every output a step's journal holds (for counts the last step lost)."""
    entries = journal_entries(Path(out_dir) / f"{step}.jsonl")
    return [o.get("data", {}) for entry in entries for o in entry.get("outputs", [])]


class LLMGuard:
    """Wraps the LLM calls of a step: an unusable reply (ValueError / UserError while reading
    it, e.g. from `ask_json`) drops the record with `bad_reply` as the reason and the message
    as detail; an endpoint failure (LLMError, after the client's retries) drops it as
    "llm_error", and `limit` of those in a row stop the run with one clear UserError (an
    unreachable endpoint is an error, not data)."""

    def __init__(self, what: str, limit: int = 3) -> None:
        self.what, self.limit, self.streak = what, limit, 0
        self._lock = threading.Lock()

    def __call__(self, call: Callable[[], Any], bad_reply: str = "bad_llm_reply") -> Any:
        try:
            out = call()
        except LLMError as err:
            with self._lock:
                self.streak += 1
                if self.streak >= self.limit:
                    raise UserError(
                        f"{self.what}: the LLM failed {self.limit} times in a row ({err})"
                    ) from None
            raise Drop("llm_error", str(err)) from None
        except (UserError, ValueError) as err:
            raise Drop(bad_reply, str(err)) from None
        with self._lock:
            self.streak = 0
        return out
