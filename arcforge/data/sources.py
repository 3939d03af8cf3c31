"""The one `source:` notion every stage reads data through.

A source spec is a string:
    world:<suite>[:<split>]     the embedded world's pool (resolved by the caller, see below);
                                split train (default), test, unseen (train tasks no SFT
                                demo or expert episode shows: RL prompts), fresh (new tasks
                                from the suite's generator, in neither split: RL prompts) or
                                dev (more such tasks, for choosing checkpoints)
    jsonl:<path>                one JSON object per line
    parquet:<path>              one record per row
    hf_disk:<path>[#<split>]    a `datasets` dataset written with `save_to_disk`
    <prefix>:<target>           a source added with `register_source(prefix, loader)`

Each record is one of three shapes, told apart by its keys:
    {"messages": [...]}                 a chat (parsed with Message.from_dict)
    {"prompt": str, "answer": str}      a prompt with a checkable answer
    {"prompt", "chosen", "rejected"}    a preference pair (prompt record; replies in `meta`)
    {"text": str}                       plain text (pretraining / mid-training)
A Task record (`id`, `kind`, `instruction`, ...: arcforge.types) is read as a prompt/answer record
that keeps the Task. Other keys ride along in `Record.meta`.

A bad record (invalid JSON, wrong types, unknown role) is reported with its file and line (or
row) and what was wrong, then either skipped and counted (on_error="skip", a logged warning) or
raised as a DataError (on_error="fatal"). A missing file is always a DataError.

`world:` is resolved by the caller so this module never imports arcforge.world: a run passes
`world=` (a `(suite, split) -> records` resolver, arcforge.stages.world_source) and `run_dir=`
(what `{run_dir}` in a path stands for) to `load_records`.

Sources of your own: `register_source("csv", load_csv)` makes `csv:<target>` a source every
stage reads; `load_csv(target)` returns Records or record dicts (the shapes above, checked and
reported like a file's lines). Register before the run reads its sources.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, field_validator

from arcforge.errors import UserError
from arcforge.types import Message, Task

log = logging.getLogger(__name__)

OnError = Literal["skip", "fatal"]
KINDS: tuple[str, ...] = ("world", "jsonl", "parquet", "hf_disk")  # the built-in prefixes


class DataError(UserError):
    """Bad data input: the message names the source, file and line, and what was wrong."""


@dataclass(frozen=True)
class Source:
    """A parsed source spec. `kind` is the prefix; `target` is the suite (world), the path
    (files) or what follows the prefix (a registered source)."""

    kind: str
    target: str
    split: str | None = None

    def __str__(self) -> str:
        if self.kind == "world":
            return f"world:{self.target}" + (f":{self.split}" if self.split else "")
        sep = "#" if self.kind == "hf_disk" else ":"
        return f"{self.kind}:{self.target}" + (f"{sep}{self.split}" if self.split else "")


class SourceSpec(BaseModel):
    """One entry of a stage's data mixture (YAML: `- {source: jsonl:a.jsonl, weight: 2}`)."""

    source: str
    weight: float = 1.0

    @field_validator("source")
    @classmethod
    def _parses(cls, v: str) -> str:
        parse_source(v)
        return v

    @field_validator("weight")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"weight must be > 0, got {v}")
        return v


@dataclass
class Record:
    """One training/eval example. Exactly one of messages / prompt / text is set.

    origin: where it came from, e.g. "data/sft.jsonl:12" or "world:math:train#3".
    task: the full Task when the record came from a task pool.
    """

    messages: list[Message] | None = None
    prompt: str | None = None
    answer: str | None = None
    text: str | None = None
    origin: str = ""
    task: Task | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> Literal["messages", "prompt", "text"]:
        if self.messages is not None:
            return "messages"
        return "prompt" if self.prompt is not None else "text"


# (suite, split) -> the records of `world:<suite>[:<split>]`
WorldResolver = Callable[[str, str | None], list[Record]]
# the target (what follows `<prefix>:`) -> Records or record dicts
SourceLoader = Callable[[str], Iterable[Record | dict[str, Any]]]

SOURCES: dict[str, SourceLoader] = {}  # registered prefixes (register_source)


def register_source(prefix: str, loader: SourceLoader) -> None:
    """Add (or replace) the source `<prefix>:<target>`, read with `loader(target)`.

    Args:
        prefix: the scheme, e.g. "csv"; not one of the built-in KINDS, no ':'.
        loader: target -> Records or record dicts (a dict is checked like a JSONL line and, when
            bad, skipped or raised by `load_records`' on_error); raise DataError for a target
            it cannot read.

    Example:
        register_source("csv", lambda path: csv.DictReader(open(path)))
        load_records("csv:data/qa.csv")  # rows with prompt/answer columns
    """
    if prefix in KINDS or not prefix or ":" in prefix:
        raise ValueError(f"source prefix {prefix!r}: empty, with a ':', or built in ({KINDS})")
    SOURCES[prefix] = loader


def expand_run_dir(spec: str, run_dir: str | Path | None) -> str:
    """`jsonl:{run_dir}/synth/rl_pool.jsonl` -> the path inside the run's directory, so a config
    can read what an earlier stage of the same run wrote, whatever `--run-dir` is."""
    if "{run_dir}" not in spec:
        return spec
    if run_dir is None:
        raise DataError(f"source {spec!r}: {{run_dir}} is only known inside a run")
    return spec.replace("{run_dir}", str(run_dir))


def parse_source(spec: str) -> Source:
    """Parse a source spec string; raises DataError naming the spec and the accepted forms."""
    kind, sep, rest = spec.partition(":")
    if not sep or (kind not in KINDS and kind not in SOURCES) or not rest:
        own = "".join(f", {k}:<target>" for k in sorted(SOURCES))
        raise DataError(
            f"bad source {spec!r}: expected world:<suite>[:split], jsonl:<path>, "
            f"parquet:<path> or hf_disk:<path>[#split]{own}"
        )
    if kind == "world":
        suite, _, split = rest.partition(":")
        return Source("world", suite, split or None)
    if kind == "hf_disk":
        path, _, split = rest.partition("#")
        return Source("hf_disk", path, split or None)
    return Source(kind, rest)


def _scalar_str(d: dict[str, Any], key: str) -> str:
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        raise ValueError(f"{key!r} must be a string, got {type(v).__name__}")
    return str(v)


def record_from_task(task: Task, origin: str) -> Record:
    """A prompt/answer record that keeps its Task (for RL and eval stages)."""
    return Record(prompt=task.instruction, answer=task.validation.answer, origin=origin, task=task)


def record_from_dict(d: Any, origin: str) -> Record:
    """Build a Record from one decoded JSON object; raises ValueError saying what is wrong."""
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object, got {type(d).__name__}")
    if "instruction" in d and "kind" in d and "id" in d:
        try:
            return record_from_task(Task.from_dict(d), origin)
        except TypeError as e:
            raise ValueError(f"bad task record: {e}") from e
    if "messages" in d:
        msgs = d["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise ValueError("'messages' must be a non-empty list")
        parsed = []
        for i, m in enumerate(msgs):
            try:  # parquet/arrow fill absent struct fields with None: drop them first
                clean = {k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m
                parsed.append(Message.from_dict(clean))
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"messages[{i}]: {e}") from e
        meta = {k: v for k, v in d.items() if k != "messages"}
        return Record(messages=parsed, origin=origin, meta=meta)
    if "chosen" in d or "rejected" in d:  # a preference pair, for reward-model training
        missing = [k for k in ("prompt", "chosen", "rejected") if d.get(k) is None]
        if missing:
            raise ValueError(f"preference record is missing {missing[0]!r}")
        meta = {k: v for k, v in d.items() if k != "prompt"}
        meta.update(chosen=_scalar_str(d, "chosen"), rejected=_scalar_str(d, "rejected"))
        return Record(prompt=_scalar_str(d, "prompt"), origin=origin, meta=meta)
    if "prompt" in d or "answer" in d:
        missing = [k for k in ("prompt", "answer") if d.get(k) is None]
        if missing:
            raise ValueError(f"prompt/answer record is missing {missing[0]!r}")
        meta = {k: v for k, v in d.items() if k not in ("prompt", "answer")}
        return Record(
            prompt=_scalar_str(d, "prompt"),
            answer=_scalar_str(d, "answer"),
            origin=origin,
            meta=meta,
        )
    if "text" in d:
        if not isinstance(d["text"], str):
            raise ValueError(f"'text' must be a string, got {type(d['text']).__name__}")
        return Record(
            text=d["text"], origin=origin, meta={k: v for k, v in d.items() if k != "text"}
        )
    raise ValueError(f"no 'messages', 'prompt'/'answer' or 'text' key (keys: {sorted(d)})")


def _iter_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    """(origin, decoded object or the ValueError of a bad line)."""
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            origin = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield origin, ValueError(f"not UTF-8 ({e.reason} at byte {e.start})")
                continue
            if not line.strip():
                continue
            try:
                yield origin, json.loads(line)
            except json.JSONDecodeError as e:
                yield origin, ValueError(f"invalid JSON ({e.msg} at column {e.colno})")


def _iter_rows(rows: list[dict[str, Any]], path: Path) -> Iterator[tuple[str, Any]]:
    for i, row in enumerate(rows, start=1):
        yield f"{path}:row {i}", row


def _read_hf_disk(src: Source, path: Path) -> list[dict[str, Any]]:
    import datasets  # heavy import, only when needed

    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        split = src.split or ("train" if "train" in ds else None)
        if split not in ds:
            raise DataError(f"{src}: choose a split with #<split>; it has {sorted(ds)}")
        ds = ds[split]
    return ds.to_list()


def _raw_items(src: Source) -> Iterator[tuple[str, Any]]:
    if src.kind in SOURCES:
        for i, item in enumerate(SOURCES[src.kind](src.target), start=1):
            yield f"{src}#{i}", item
        return
    path = Path(src.target)
    if not path.exists():
        raise DataError(f"source {src}: file not found: {path}")
    if src.kind == "jsonl":
        yield from _iter_jsonl(path)
    elif src.kind == "parquet":
        import pyarrow.parquet as pq

        yield from _iter_rows(pq.read_table(str(path)).to_pylist(), path)
    else:
        yield from _iter_rows(_read_hf_disk(src, path), path)


def load_records(
    spec: str | SourceSpec | Source,
    on_error: OnError = "skip",
    world: WorldResolver | None = None,
    run_dir: str | Path | None = None,
) -> list[Record]:
    """Read every record of one source.

    Args:
        spec: a source string, SourceSpec or parsed Source.
        on_error: "skip" logs each bad record (file:line: what) and drops it; "fatal" raises.
        world: the resolver of `world:` sources (the run's: arcforge.stages.world_source).
        run_dir: the directory `{run_dir}` in a source path stands for.

    Returns:
        The records in file order.
    """
    if on_error not in ("skip", "fatal"):
        raise ValueError(f"on_error must be 'skip' or 'fatal', got {on_error!r}")
    src = (
        spec
        if isinstance(spec, Source)
        else parse_source(
            expand_run_dir(spec.source if isinstance(spec, SourceSpec) else spec, run_dir)
        )
    )
    if src.kind == "world":
        if world is None:
            raise DataError(f"source {src}: no world resolver given (world=)")
        return world(src.target, src.split)
    records, bad = [], []
    for origin, obj in _raw_items(src):
        try:
            if isinstance(obj, ValueError):
                raise obj
            records.append(obj if isinstance(obj, Record) else record_from_dict(obj, origin))
        except ValueError as e:
            if on_error == "fatal":
                raise DataError(f"{origin}: bad record: {e}") from None
            bad.append(f"{origin}: bad record skipped: {e}")
    for msg in bad:
        log.warning(msg)
    if bad:
        log.warning("%s: skipped %d bad record(s), kept %d", src, len(bad), len(records))
    return records


def _quotas(weights: list[float], n: int) -> list[int]:
    """Split n by weight with the largest-remainder rule (ties go to the earlier source)."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def mix(sources: list[tuple[SourceSpec | float, list[Record]]], n: int, seed: int) -> list[Record]:
    """Draw a weighted mixture of n records, deterministically.

    Each source gets round(n * w / sum(w)) records (largest remainder), drawn from a seeded
    permutation of its records and cycling through further permutations when it has fewer than
    its quota (so a record repeats only after all of its source's records were used). The
    result is shuffled with the same seed.
    """
    if not sources:
        raise ValueError("mix needs at least one source")
    rng = random.Random(seed)
    weights = [s.weight if isinstance(s, SourceSpec) else float(s) for s, _ in sources]
    if any(not w > 0 for w in weights):
        raise ValueError(f"mixture weights must be > 0, got {weights}")
    out: list[Record] = []
    for (spec, recs), k in zip(sources, _quotas(weights, n), strict=True):
        if k and not recs:
            name = spec.source if isinstance(spec, SourceSpec) else "a source"
            raise DataError(f"{name} has no records but weight > 0")
        drawn: list[Record] = []
        while len(drawn) < k:
            perm = list(recs)
            rng.shuffle(perm)
            drawn.extend(perm[: k - len(drawn)])
        out.extend(drawn)
    rng.shuffle(out)
    return out
