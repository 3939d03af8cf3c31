"""Metric sinks behind one `logging:` config key: JSONL always, TensorBoard, W&B, trackio.

A trainer makes one `MetricSink(cfg, out_dir)` and calls `log(step, row)` once per logged step;
the sink fans the row out to every configured backend. `metrics.jsonl` (one JSON object per
line, `step` first) is always written: the run report and resumption read it. The other sinks
get the row flattened (`{"a": {"b": 1}}` -> `a/b`) and keep only numbers, since their
dashboards plot scalars. Their libraries are imported only when configured, and a missing one
is a `UserError` naming the extra to install (`pip install 'arcforge[wandb]'`).

`JsonlSink` is the one writer of JSONL metric files: metrics.jsonl behind `MetricSink`, and on
its own the side logs a trainer keeps (probe.jsonl, dsa_metrics.jsonl); `read_rows` reads any
of them back. Resuming at step k drops JSONL lines past k and asks TensorBoard to purge events
past k, so a restarted run never shows a step twice. Sinks that are not rank 0 (`enabled=False`)
write nothing.

`on_write(hook)` registers a callback that every `JsonlSink` calls after each row, on every
rank, written or not: the pipeline's kill hook for resume tests (arcforge.pipeline) counts rows
with it.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, field_validator

from arcforge.errors import UserError

SinkName = Literal["jsonl", "tensorboard", "wandb", "trackio"]
JSONL_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


class LoggingCfg(BaseModel):
    """Where training metrics go.

    sinks: backends; "jsonl" is required (the report reads metrics.jsonl); add "tensorboard"
        (event files under `<stage dir>/tensorboard`), "wandb" or "trackio".
    project: the W&B / trackio project; each stage's run is named `<run>/<stage>`.
    """

    model_config = ConfigDict(extra="forbid")

    sinks: list[SinkName] = ["jsonl"]
    project: str = "arcforge"

    @field_validator("sinks")
    @classmethod
    def _jsonl_required(cls, sinks: list[str]) -> list[str]:
        if "jsonl" not in sinks:
            raise ValueError("must include 'jsonl': the run report and resume read metrics.jsonl")
        return list(dict.fromkeys(sinks))


class Closing:
    """A context manager that calls the subclass's `close()` on exit and returns itself on
    entry (metric sinks, hook sets on a model)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Sink(Protocol):
    def log(self, step: int, row: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def flatten(row: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(name, value) for every number in `row`, nested keys joined with "/"; strings, lists
    and None are skipped (a dashboard plots scalars)."""
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, name + "/")
        elif isinstance(value, numbers.Real):
            yield name, float(value)


def _require(module: str, sink: str) -> Any:
    """Import `module` for `sink`, or a UserError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f"logging sink {sink!r} needs the {sink} package: pip install 'arcforge[{sink}]'"
        ) from None


WriteHook = Callable[[Path, dict[str, Any]], None]  # (file, record) after each JSONL row
_WRITE_HOOKS: list[WriteHook] = []


def on_write(hook: WriteHook) -> Callable[[], None]:
    """Call `hook(path, record)` after every row any `JsonlSink` of this process logs from now
    on (a disabled sink's rows too); returns the function that removes it."""
    _WRITE_HOOKS.append(hook)
    return lambda: _WRITE_HOOKS.remove(hook)


class JsonlSink:
    """Append-only JSONL metrics file, one `{"step": step, **row}` object a line; lines past
    `resume_step` are dropped on open, and a fresh run (`resume_step` None) starts the file
    over. Disabled (a rank other than 0), it writes nothing but still calls the write hooks."""

    def __init__(self, path: Path, resume_step: int | None = None, enabled: bool = True):
        self.path, self.enabled = path, enabled
        if not enabled:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            path.unlink(missing_ok=True)
        elif path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            keep = [ln for ln in lines if json.loads(ln).get("step", 0) <= resume_step]
            path.write_text("".join(ln + "\n" for ln in keep))

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        record = {"step": step, **row}
        if self.enabled:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        for hook in list(_WRITE_HOOKS):
            hook(self.path, record)

    def rows(self) -> list[dict[str, Any]]:
        """The rows in the file (those kept from before a resume, then the logged ones)."""
        return read_rows(self.path)

    def close(self) -> None:
        pass


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics-style .jsonl file ([] when it does not exist)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(ln) for ln in text.splitlines() if ln.strip()]


class TensorBoardSink:
    """Scalars to `torch.utils.tensorboard` event files (needs the tensorboard package)."""

    def __init__(self, log_dir: Path, resume_step: int | None = None):
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge)

    def log(self, step: int, row: dict[str, Any]) -> None:
        for name, value in flatten(row):
            if math.isfinite(value):
                self.writer.add_scalar(name, value, global_step=step)

    def close(self) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run (its files under the stage directory)."""

    def __init__(self, project: str, name: str, out_dir: Path, config: dict[str, Any] | None):
        self.wandb = _require("wandb", "wandb")
        self.run = self.wandb.init(project=project, name=name, dir=str(out_dir), config=config)

    def log(self, step: int, row: dict[str, Any]) -> None:
        self.run.log(dict(flatten(row)), step=step)

    def close(self) -> None:
        self.run.finish()


class TrackioSink:
    """A trackio run (trackio mirrors the W&B calls)."""

    def __init__(self, project: str, name: str, config: dict[str, Any] | None):
        self.trackio = _require("trackio", "trackio")
        self.trackio.init(project=project, name=name, config=config)

    def log(self, step: int, row: dict[str, Any]) -> None:
        self.trackio.log(dict(flatten(row)), step=step)

    def close(self) -> None:
        self.trackio.finish()


class MetricSink(Closing):
    """Every configured sink behind one `log(step, row)`.

    Args:
        cfg: the run's `logging:` section.
        out_dir: the stage directory (metrics.jsonl and tensorboard/ go there).
        name: the run name W&B / trackio show (e.g. `<run>/<stage>`); default: out_dir's name.
        config: the settings W&B / trackio record with the run.
        resume_step: the step a resumed run restarts after (None: a fresh run).
        enabled: False on ranks other than 0: nothing is written.
    """

    def __init__(
        self,
        cfg: LoggingCfg,
        out_dir: str | Path,
        name: str | None = None,
        config: dict[str, Any] | None = None,
        resume_step: int | None = None,
        enabled: bool = True,
    ):
        out = Path(out_dir)
        self.path = out / JSONL_FILE
        self.sinks: list[Sink] = []
        if not enabled:  # its rows still reach the write hooks, as on rank 0
            self.sinks.append(JsonlSink(self.path, resume_step, enabled=False))
            return
        name = name or out.name
        for sink in cfg.sinks:
            if sink == "jsonl":
                self.sinks.append(JsonlSink(self.path, resume_step))
            elif sink == "tensorboard":
                self.sinks.append(TensorBoardSink(out / TENSORBOARD_DIR, resume_step))
            elif sink == "wandb":
                self.sinks.append(WandbSink(cfg.project, name, out, config))
            elif sink == "trackio":
                self.sinks.append(TrackioSink(cfg.project, name, config))

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Record `row` (metric name -> value; a `step` key in it is ignored) at `step`."""
        clean = {k: v for k, v in row.items() if k != "step"}
        for sink in self.sinks:
            sink.log(step, clean)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
