"""The synthesis pipeline: provenance, fan-out, drop reasons, counts, and resume after an
interruption without losing or duplicating records."""

from __future__ import annotations

import json
import threading

import pytest

from arcforge.errors import UserError
from arcforge.synth.pipeline import Drop, Pipeline, Record, Step, filter_step, read_records


def seeds(n: int) -> list[Record]:
    return [Record(f"s{i}", {"x": i}) for i in range(n)]


def expand(rec: Record) -> list[Record]:
    """Two variants per seed; seed 3 yields nothing."""
    if rec.data["x"] == 3:
        return []
    return [rec.child(k, {"x": rec.data["x"] * 10 + k}) for k in range(2)]


def odd_only(rec: Record) -> str | None:
    return None if rec.data["x"] % 2 else "even"


def test_steps_counts_provenance_and_reasons(tmp_path):
    def explode(rec: Record) -> Record:
        if rec.data["x"] == 41:
            raise ZeroDivisionError("boom on 41")
        if rec.data["x"] == 1:
            raise Drop("too easy", "x=1")
        return Record(rec.id, {**rec.data, "y": rec.data["x"] + 1}, rec.provenance)

    steps = [Step("expand", expand), filter_step("odd", odd_only), Step("inc", explode)]
    out = Pipeline(steps, tmp_path, workers=3).run(seeds(5))
    # seeds 0..4 -> variants x = 0,1 | 10,11 | 20,21 | (3: none) | 40,41 -> odd: 1,11,21,41
    # inc: 1 dropped "too easy", 41 errors, 11 and 21 survive
    assert [r.data["x"] for r in out] == [11, 21]
    assert all(r.data["y"] == r.data["x"] + 1 for r in out)
    assert out[0].id == "s1/1"
    assert out[0].provenance == [
        {"step": "expand", "input": "s1"},
        {"step": "odd", "input": "s1/1"},
        {"step": "inc", "input": "s1/1"},
    ]
    summary = json.loads((tmp_path / "summary.json").read_text())
    by = {s["step"]: s for s in summary["steps"]}
    assert (by["expand"]["in"], by["expand"]["out"], by["expand"]["dropped"]) == (
        5,
        8,
        {"no output": 1},
    )
    assert (by["odd"]["in"], by["odd"]["out"], by["odd"]["dropped"]) == (8, 4, {"even": 4})
    assert by["inc"]["dropped"] == {"too easy": 1, "error: ZeroDivisionError": 1}
    assert "boom on 41" in by["inc"]["errors"][0] and summary["final"] == 2
    journal = [json.loads(x) for x in (tmp_path / "inc.jsonl").read_text().splitlines()]
    assert {e["input"]: e.get("detail") for e in journal if e["dropped"] == "too easy"} == {
        "s0/1": "x=1"
    }


def test_resume_after_interruption_neither_loses_nor_duplicates(tmp_path):
    calls: list[str] = []
    lock = threading.Lock()
    crash = {"on": True}

    def slow_square(rec: Record) -> Record:
        with lock:
            calls.append(rec.id)
        if crash["on"] and rec.data["x"] == 13:
            raise KeyboardInterrupt  # the user pressed ^C while this record was in flight
        return Record(rec.id, {"sq": rec.data["x"] ** 2})

    steps = [
        Step("square", slow_square, workers=1, on_error="raise"),
        filter_step("odd", lambda r: None if r.data["sq"] % 2 else "even"),
    ]
    with pytest.raises(KeyboardInterrupt):
        Pipeline(steps, tmp_path).run(seeds(20))
    first = list(calls)
    assert first[-1] == "s13" and len(first) == 14  # one worker: s0..s13 attempted in order
    journal = (tmp_path / "square.jsonl").read_text().splitlines()
    assert len(journal) == 13  # s13 was in flight: not journaled
    with (tmp_path / "square.jsonl").open("a") as f:
        f.write('{"input": "s14", "outp')  # a torn write from a killed process
    crash["on"], calls[:] = False, []
    out = Pipeline(steps, tmp_path).run(seeds(20))
    assert sorted(calls) == sorted(f"s{i}" for i in range(13, 20))  # only unfinished work
    assert [r.data["sq"] for r in out] == [i * i for i in range(20) if i % 2]
    lines = [
        json.loads(x)
        for x in (tmp_path / "square.jsonl").read_text().splitlines()
        if x.startswith('{"input": "s') and x.endswith("}")
    ]
    assert sorted(e["input"] for e in lines) == sorted(f"s{i}" for i in range(20))
    # a third run does no work at all and gives the same records
    calls[:] = []
    again = Pipeline(steps, tmp_path).run(seeds(20))
    assert calls == [] and [r.to_dict() for r in again] == [r.to_dict() for r in out]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"][0]["resumed"] == 20 and summary["steps"][1]["dropped"] == {"even": 10}


def test_duplicate_output_ids_are_dropped_and_bad_input_is_named(tmp_path):
    def clash(rec: Record) -> Record:
        return Record("same", {"from": rec.id})

    out = Pipeline([Step("clash", clash)], tmp_path).run(seeds(3))
    assert [r.data["from"] for r in out] == ["s0"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"][0]["dropped"] == {"duplicate id": 2}
    with pytest.raises(UserError, match="seed ids must be unique.*s0"):
        Pipeline([Step("a", clash)], tmp_path / "b").run(seeds(2) + seeds(1))
    with pytest.raises(UserError, match="step names must be unique"):
        Pipeline([Step("a", clash), Step("a", clash)], tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "data": {}}\nnot json\n')
    with pytest.raises(UserError, match="bad.jsonl:2: not a record line"):
        read_records(bad)


def test_workers_run_in_parallel(tmp_path):
    barrier = threading.Barrier(3, timeout=10)

    def meet(rec: Record) -> Record:
        barrier.wait()  # breaks (BrokenBarrierError) unless 3 records are in flight at once
        return rec

    out = Pipeline([Step("meet", meet, workers=3)], tmp_path).run(seeds(6))
    assert len(out) == 6
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"][0]["dropped"] == {}
