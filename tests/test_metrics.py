"""MetricSink: metrics.jsonl (always), TensorBoard event files read back with tensorboard's
own reader, resume trimming, the `logging:` config and the error for a missing library; the
write hooks every JsonlSink calls."""

import json
import sys

import pytest
from pydantic import ValidationError

from arcforge.errors import UserError
from arcforge.metrics import JsonlSink, LoggingCfg, MetricSink, flatten, on_write, read_rows


def read_jsonl(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_jsonl_is_the_default_and_resume_drops_later_steps(tmp_path):
    assert LoggingCfg().sinks == ["jsonl"]
    with MetricSink(LoggingCfg(), tmp_path) as sink:
        for step in (1, 2, 3):
            sink.log(step, {"loss": 1.0 / step, "phase": "a", "step": 99})
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert rows[0] == {"step": 1, "loss": 1.0, "phase": "a"}  # the step argument wins
    assert [r["step"] for r in rows] == [1, 2, 3]
    with MetricSink(LoggingCfg(), tmp_path, resume_step=2) as sink:  # restart after step 2
        sink.log(3, {"loss": 0.25})
    assert [(r["step"], r["loss"]) for r in read_jsonl(tmp_path / "metrics.jsonl")] == [
        (1, 1.0),
        (2, 0.5),
        (3, 0.25),
    ]
    MetricSink(LoggingCfg(), tmp_path)  # a fresh run starts the file over
    assert not (tmp_path / "metrics.jsonl").exists()


def test_write_hooks_see_every_jsonl_row_once_until_removed(tmp_path):
    seen = []
    remove = on_write(lambda path, record: seen.append((path.name, record)))
    try:
        probe = JsonlSink(tmp_path / "probe.jsonl")
        probe.log(1, {"mean": 0.5})
        with MetricSink(LoggingCfg(), tmp_path) as sink:  # one call per row, not per sink
            sink.log(2, {"loss": 1.0})
        MetricSink(LoggingCfg(), tmp_path / "r1", enabled=False).log(2, {"loss": 1.0})
    finally:
        remove()
    probe.log(3, {"mean": 0.7})
    assert seen == [
        ("probe.jsonl", {"step": 1, "mean": 0.5}),
        ("metrics.jsonl", {"step": 2, "loss": 1.0}),
        ("metrics.jsonl", {"step": 2, "loss": 1.0}),  # a rank other than 0 counts it too
    ]
    assert not (tmp_path / "r1").exists()  # but writes nothing
    assert (
        probe.rows()
        == read_rows(tmp_path / "probe.jsonl")
        == [
            {"step": 1, "mean": 0.5},
            {"step": 3, "mean": 0.7},
        ]
    )


def test_tensorboard_scalars_read_back(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard package is in the [dev] extra")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = LoggingCfg(sinks=["jsonl", "tensorboard"])
    with MetricSink(cfg, tmp_path) as sink:
        sink.log(1, {"loss": 2.0, "reward": {"mean": 0.5, "name": "x"}, "phase": "warmup"})
        sink.log(2, {"loss": 1.5, "reward": {"mean": 0.75}, "nan": float("nan")})
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["loss", "reward/mean"]
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(1, 2.0), (2, 1.5)]
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 0.5), (2, 0.75)]
    assert len(read_jsonl(tmp_path / "metrics.jsonl")) == 2


def test_flatten_keeps_numbers_only():
    row = {"a": 1, "b": {"c": 2.5, "d": "s", "e": {"f": True}}, "g": [1], "h": None}
    assert dict(flatten(row)) == {"a": 1.0, "b/c": 2.5, "b/e/f": 1.0}


def test_config_errors_and_missing_library(tmp_path, monkeypatch):
    with pytest.raises(ValidationError, match="must include 'jsonl'"):
        LoggingCfg(sinks=["tensorboard"])
    with pytest.raises(ValidationError):
        LoggingCfg(sinks=["jsonl", "mlflow"])
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if wandb were not installed
    with pytest.raises(UserError, match=r"pip install 'arcforge\[wandb\]'"):
        MetricSink(LoggingCfg(sinks=["jsonl", "wandb"]), tmp_path)
    sink = MetricSink(LoggingCfg(sinks=["jsonl", "wandb"]), tmp_path, enabled=False)
    sink.log(1, {"loss": 1.0})  # another rank: nothing written, no library needed
    assert not (tmp_path / "metrics.jsonl").exists()
