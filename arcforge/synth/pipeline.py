"""The synthesis pipeline: named steps over streams of records with provenance (docs/synthesis.md).

    seed -> executable task -> verifiable environment -> trajectories -> filters -> exports

A `Record` is `id` + JSON `data` + `provenance` (one entry per step it went through: the step
name and the id of the input it came from). A `Step` maps one input record to zero, one or many
output records: return a Record or a list of Records, or raise `Drop(reason)` (returning None
or [] drops with reason "filtered" / "no output"). Any other exception drops the record with
reason "error: <ExceptionType>" (on_error="drop", the default: one bad seed must not stop a
night's synthesis) or stops the run (on_error="raise").

Resume. Each step keeps a journal, `<out_dir>/<step>.jsonl`, with one line per finished input:
`{"input": id, "outputs": [records], "dropped": reason | null}`. One input = one appended line,
so an interruption loses at most the inputs in flight; a torn last line is ignored. A rerun
reads the journal, skips every input id already there and appends only new lines, so nothing is
lost or duplicated (output ids are checked for uniqueness across the step; a repeat is dropped
as "duplicate id"). Step functions must be deterministic in their ids: derive child ids from
the parent's (`Record.child`).

Parallelism: each step runs its inputs on a thread pool (`workers`); the work is I/O-bound
(sandbox processes, HTTP calls to an LLM), so threads suffice. Every step shows a progress bar.
`<out_dir>/summary.json` holds per-step counts: in, out, dropped by reason, resumed, seconds.

Simplification: steps are barriers (a step starts when the previous one has finished all its
inputs) rather than a streaming dataflow; this keeps resume and counts exact and simple.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from arcforge.errors import UserError
from arcforge.progress import progress

Parsed = TypeVar("Parsed")


@dataclass
class Record:
    """One item flowing through the pipeline. `data` must be JSON-serialisable."""

    id: str
    data: dict[str, Any]
    provenance: list[dict[str, Any]] = field(default_factory=list)

    def child(self, suffix: str | int, data: dict[str, Any]) -> Record:
        """A derived record with id `<id>/<suffix>` (the pipeline adds the provenance entry)."""
        return Record(f"{self.id}/{suffix}", data, list(self.provenance))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "data": self.data, "provenance": self.provenance}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        return cls(str(d["id"]), dict(d.get("data") or {}), list(d.get("provenance") or []))


class Drop(Exception):
    """Raised by a step function to drop its input with a reason (counted in the summary)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


StepFn = Callable[[Record], "Record | list[Record] | None"]


@dataclass
class Step:
    """A named map / flat-map / filter over records (see the module docstring).

    Args:
        name: the step's name (journal file name, provenance, summary); unique in a pipeline.
        fn: input record -> Record | list[Record] | None, or raise Drop(reason).
        workers: threads for this step (None: the pipeline's default).
        on_error: "drop" (count as "error: <type>") or "raise" (stop the run).
    """

    name: str
    fn: StepFn
    workers: int | None = None
    on_error: Literal["drop", "raise"] = "drop"


def filter_step(name: str, check: Callable[[Record], str | None], **kw: Any) -> Step:
    """A step that keeps a record unchanged when `check` returns None, else drops it with the
    returned reason."""

    def fn(rec: Record) -> Record:
        reason = check(rec)
        if reason:
            raise Drop(reason)
        return rec

    return Step(name, fn, **kw)


@dataclass
class StepSummary:
    name: str
    n_in: int = 0
    n_out: int = 0
    dropped: Counter = field(default_factory=Counter)
    resumed: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "in": self.n_in,
            "out": self.n_out,
            "dropped": dict(sorted(self.dropped.items())),
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
            "errors": self.errors[:20],
        }


def journal_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a step journal in order (none when there is no journal yet); a torn or
    corrupt line (an interrupted write) is skipped."""
    entries = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _read_journal(path: Path) -> dict[str, dict[str, Any]]:
    """input id -> journal entry (the first one of an id)."""
    entries: dict[str, dict[str, Any]] = {}
    for entry in journal_entries(path):
        if "input" in entry:
            entries.setdefault(str(entry["input"]), entry)
    return entries


class Pipeline:
    """Runs steps in order over seed records, journaling each step under `out_dir`.

    Args:
        steps: the steps, in order (names must be unique).
        out_dir: where journals and summary.json go; reuse it to resume.
        workers: default threads per step.
        name: shown in progress bars.
    """

    def __init__(
        self, steps: list[Step], out_dir: str | Path, workers: int = 4, name: str = "synth"
    ):
        names = [s.name for s in steps]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise UserError(f"pipeline {name}: step names must be unique, repeated: {dup}")
        bad = [n for n in names if not n or "/" in n or n.startswith(".")]
        if bad:
            raise UserError(f"pipeline {name}: invalid step name(s) {bad} (used as file names)")
        self.steps, self.out_dir = steps, Path(out_dir)
        self.workers, self.name = workers, name
        self.summaries: list[StepSummary] = []

    def run(self, seeds: Iterable[Record]) -> list[Record]:
        """Run every step; returns the last step's output records (resumes from journals)."""
        records = list(seeds)
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise UserError(f"pipeline {self.name}: seed ids must be unique, repeated: {dup}")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.summaries = []
        try:
            for step in self.steps:
                records = self._run_step(step, records)
        finally:
            self.write_summary()
        return records

    def _apply(self, step: Step, rec: Record) -> dict[str, Any]:
        """Run the step function on one record -> its journal entry."""
        entry: dict[str, Any] = {"input": rec.id, "outputs": [], "dropped": None}
        try:
            out = step.fn(rec)
        except Drop as d:
            entry["dropped"] = d.reason
            if d.detail:
                entry["detail"] = d.detail[:2000]
            return entry
        except Exception as err:  # noqa: BLE001 - a step's failure is data, unless asked not to
            if step.on_error == "raise":
                raise
            entry["dropped"] = f"error: {type(err).__name__}"
            entry["detail"] = str(err)[:2000]
            return entry
        outs = [] if out is None else [out] if isinstance(out, Record) else list(out)
        if not outs:
            entry["dropped"] = "filtered" if out is None else "no output"
        for o in outs:
            if not isinstance(o, Record):
                raise TypeError(f"step {step.name} returned {type(o).__name__}, not a Record")
            o.provenance = [*rec.provenance, {"step": step.name, "input": rec.id}]
            entry["outputs"].append(o.to_dict())
        json.dumps(entry)  # fail here, naming the step, rather than corrupt the journal
        return entry

    def _run_step(self, step: Step, inputs: list[Record]) -> list[Record]:
        t0 = time.time()
        path = self.out_dir / f"{step.name}.jsonl"
        done = _read_journal(path)
        todo = [r for r in inputs if r.id not in done]
        summ = StepSummary(step.name, n_in=len(inputs), resumed=len(inputs) - len(todo))
        if path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            with path.open("a") as f:  # end a torn line so the next entry starts clean
                f.write("\n")
        workers = max(1, step.workers or self.workers)
        with (
            path.open("a") as journal,
            progress(len(inputs), f"{self.name}:{step.name}", start=summ.resumed) as bar,
        ):
            with ThreadPoolExecutor(max_workers=workers) as pool:
                queue, pending, n = iter(todo), set(), summ.resumed
                try:
                    while True:
                        for rec in queue:  # keep at most `workers` inputs in flight
                            pending.add(pool.submit(self._apply, step, rec))
                            if len(pending) >= workers:
                                break
                        if not pending:
                            break
                        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in finished:
                            entry = fut.result()  # on_error="raise" (or ^C) propagates here
                            journal.write(json.dumps(entry, ensure_ascii=False) + "\n")
                            journal.flush()
                            done[entry["input"]] = entry
                            n += 1
                            bar.update(n)
                except BaseException:
                    for f in pending:  # the rest were never started; a rerun does them
                        f.cancel()
                    raise
        return self._collect(step, inputs, done, summ, t0)

    def _collect(
        self,
        step: Step,
        inputs: list[Record],
        done: dict[str, dict[str, Any]],
        summ: StepSummary,
        t0: float,
    ) -> list[Record]:
        out: list[Record] = []
        seen: set[str] = set()
        for rec in inputs:  # input order, whatever order the workers finished in
            entry = done[rec.id]
            if entry.get("dropped"):
                summ.dropped[entry["dropped"]] += 1
                if str(entry["dropped"]).startswith("error"):
                    summ.errors.append(f"{rec.id}: {entry.get('detail', '')[:300]}")
                continue
            for o in entry["outputs"]:
                r = Record.from_dict(o)
                if r.id in seen:
                    summ.dropped["duplicate id"] += 1
                    continue
                seen.add(r.id)
                out.append(r)
        summ.n_out, summ.seconds = len(out), time.time() - t0
        self.summaries.append(summ)
        return out

    def write_summary(self) -> Path:
        """Write `<out_dir>/summary.json` with the steps run so far."""
        path = self.out_dir / "summary.json"
        steps = [s.to_dict() for s in self.summaries]
        final = self.summaries[-1].n_out if self.summaries else 0
        path.write_text(
            json.dumps({"pipeline": self.name, "steps": steps, "final": final}, indent=1)
        )
        return path


def parse_jsonl(path: str | Path, parse: Callable[[Any], Parsed], what: str) -> list[Parsed]:
    """`parse` of the JSON value of each non-blank line of a JSONL file. A line that is not
    JSON, or whose value `parse` refuses (ValueError, TypeError, KeyError), is a UserError
    naming the file, the line number and `what` the line is not (e.g. "not a record line")."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                out.append(parse(json.loads(line)))
            except (ValueError, KeyError, TypeError) as err:
                raise UserError(f"{path}:{n}: {what} ({err})") from None
    return out


def read_records(path: str | Path) -> list[Record]:
    """Records from a JSONL file of {"id", "data", "provenance"} lines."""
    return parse_jsonl(path, Record.from_dict, "not a record line")


def write_records(records: Iterable[Record], path: str | Path) -> Path:
    """Write records as JSONL (atomically: a temp file renamed into place)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records))
    tmp.replace(p)
    return p
