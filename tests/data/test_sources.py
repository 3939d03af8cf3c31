"""Sources: every format from real temp files, bad records with file:line, weighted mixing."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arcforge.data.sources import (
    DataError,
    Record,
    SourceSpec,
    load_records,
    mix,
    parse_source,
    register_source,
)

CHAT = {
    "messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning": "add", "train": False},
    ]
}
QA = {"prompt": "3*3?", "answer": "9"}
TEXT = {"text": "plain document", "id": "d1"}


def _write_jsonl(path, lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_parse_source_forms():
    s = parse_source("world:math:test")
    assert (s.kind, s.target, s.split) == ("world", "math", "test")
    assert parse_source("world:swe").split is None
    assert parse_source("jsonl:/a/b.jsonl").target == "/a/b.jsonl"
    h = parse_source("hf_disk:/d/ds#validation")
    assert (h.kind, h.target, h.split) == ("hf_disk", "/d/ds", "validation")
    assert str(h) == "hf_disk:/d/ds#validation"
    for bad in ("csv:x.csv", "jsonl:", "nocolon"):
        with pytest.raises(DataError, match="expected world:"):
            parse_source(bad)
    with pytest.raises(ValueError):
        SourceSpec(source="jsonl:x", weight=0)


def test_jsonl_three_shapes(tmp_path):
    p = _write_jsonl(tmp_path / "a.jsonl", [CHAT, "", QA, TEXT])
    recs = load_records(f"jsonl:{p}", on_error="fatal")
    assert [r.kind for r in recs] == ["messages", "prompt", "text"]
    assert recs[0].messages[1].reasoning == "add" and recs[0].messages[1].train is False
    assert (recs[1].prompt, recs[1].answer) == ("3*3?", "9")
    assert recs[2].text == "plain document" and recs[2].meta == {"id": "d1"}
    # Blank line 2 is skipped, so the QA record is on line 3.
    assert [r.origin for r in recs] == [f"{p}:1", f"{p}:3", f"{p}:4"]


def test_jsonl_task_records(tmp_path):
    task = {"id": "t1", "kind": "math", "instruction": "1+1?", "validation": {"answer": "2"}}
    p = _write_jsonl(tmp_path / "t.jsonl", [task])
    (r,) = load_records(f"jsonl:{p}")
    assert (r.prompt, r.answer, r.task.id) == ("1+1?", "2", "t1")


BAD_LINES = [
    QA,  # 1 ok
    '{"prompt": "x", "answer": ',  # 2 invalid JSON
    {"messages": [{"role": "wizard", "content": "hi"}]},  # 3 unknown role
    {"prompt": ["a"], "answer": "b"},  # 4 wrong type
    [1, 2],  # 5 not an object
    {"foo": 1},  # 6 no known key
    TEXT,  # 7 ok
]


def test_bad_records_skipped_with_file_and_line(tmp_path, caplog):
    p = _write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    with caplog.at_level(logging.WARNING, logger="arcforge.data.sources"):
        recs = load_records(f"jsonl:{p}", on_error="skip")
    assert [r.origin for r in recs] == [f"{p}:1", f"{p}:7"]
    text = caplog.text
    assert f"{p}:2: bad record skipped: invalid JSON" in text
    assert f"{p}:3: bad record skipped: messages[0]: message role" in text and "wizard" in text
    assert f"{p}:4: bad record skipped: 'prompt' must be a string, got list" in text
    assert f"{p}:5: bad record skipped: expected a JSON object, got list" in text
    assert f"{p}:6: bad record skipped: no 'messages'" in text
    assert "skipped 5 bad record(s), kept 2" in text


def test_bad_record_fatal_names_first_bad_line(tmp_path):
    p = _write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    with pytest.raises(DataError, match=rf"{p}:2: bad record: invalid JSON"):
        load_records(f"jsonl:{p}", on_error="fatal")


def test_invalid_utf8_line_is_a_bad_record(tmp_path):
    p = tmp_path / "u.jsonl"
    p.write_bytes(b'{"text": "ok"}\n{"text": "\xff\xfe"}\n')
    recs = load_records(f"jsonl:{p}")
    assert len(recs) == 1
    with pytest.raises(DataError, match=rf"{p}:2: bad record: not UTF-8"):
        load_records(f"jsonl:{p}", on_error="fatal")


def test_missing_file_is_always_fatal(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_records(f"jsonl:{tmp_path / 'nope.jsonl'}", on_error="skip")


def test_parquet(tmp_path):
    # Arrow unifies the message structs: absent fields come back as None and must not turn
    # into train=False or reasoning=None-overrides.
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]},
        {"messages": [{"role": "assistant", "content": "x", "train": False}]},
        {"messages": [{"role": "robot", "content": "x"}]},
    ]
    p = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    recs = load_records(f"parquet:{p}")
    assert len(recs) == 2
    assert [m.train for m in recs[0].messages] == [True, True]
    assert recs[1].messages[0].train is False
    with pytest.raises(DataError, match=rf"{p}:row 3: bad record: messages\[0\]"):
        load_records(f"parquet:{p}", on_error="fatal")


def test_hf_disk(tmp_path):
    import datasets

    # An integer answer column is read as its string form.
    ds = datasets.Dataset.from_list(
        [{"prompt": "3*3?", "answer": 9}, {"prompt": "5-1?", "answer": 4}]
    )
    ds.save_to_disk(str(tmp_path / "ds"))
    recs = load_records(f"hf_disk:{tmp_path / 'ds'}")
    assert [(r.prompt, r.answer) for r in recs] == [("3*3?", "9"), ("5-1?", "4")]
    dd = datasets.DatasetDict({"train": ds, "test": ds.select([1])})
    dd.save_to_disk(str(tmp_path / "dd"))
    assert len(load_records(f"hf_disk:{tmp_path / 'dd'}#test")) == 1
    assert len(load_records(f"hf_disk:{tmp_path / 'dd'}")) == 2  # defaults to train


def test_world_resolver():
    calls = []

    def resolver(suite, split):
        calls.append((suite, split))
        return [Record(prompt="p", answer="a", origin=f"world:{suite}")]

    with pytest.raises(DataError, match="no world resolver"):
        load_records("world:math")
    assert load_records("world:math:test", world=resolver)[0].origin == "world:math"
    assert calls == [("math", "test")]


def _recs(tag, n):
    return [Record(text=f"{tag}{i}", origin=tag) for i in range(n)]


def test_mix_quotas_and_determinism():
    a, b = _recs("a", 10), _recs("b", 3)
    specs = [SourceSpec(source="jsonl:a", weight=3), SourceSpec(source="jsonl:b", weight=1)]
    out = mix(list(zip(specs, [a, b], strict=True)), n=8, seed=0)
    # 8 * 3/4 = 6 from a, 8 * 1/4 = 2 from b.
    assert sum(r.origin == "a" for r in out) == 6 and sum(r.origin == "b" for r in out) == 2
    assert len({r.text for r in out if r.origin == "a"}) == 6  # no repeat within one pass
    again = mix(list(zip(specs, [a, b], strict=True)), n=8, seed=0)
    assert [r.text for r in again] == [r.text for r in out]
    other = mix(list(zip(specs, [a, b], strict=True)), n=8, seed=1)
    assert [r.text for r in other] != [r.text for r in out]


def test_mix_cycles_small_source_and_rounds_by_largest_remainder():
    # weights 1:1:1 over n=10 -> exact 3.33 each -> 3,3,3 + 1 extra to the first source.
    srcs = [(1.0, _recs("a", 2)), (1.0, _recs("b", 5)), (1.0, _recs("c", 5))]
    out = mix(srcs, n=10, seed=3)
    counts = {t: sum(r.origin == t for r in out) for t in "abc"}
    assert counts == {"a": 4, "b": 3, "c": 3}
    # Source a has 2 records and a quota of 4: each is used exactly twice.
    a_texts = sorted(r.text for r in out if r.origin == "a")
    assert a_texts == ["a0", "a0", "a1", "a1"]
    with pytest.raises(DataError, match="no records"):
        mix([(SourceSpec(source="jsonl:e"), [])], n=2, seed=0)


def test_run_dir_placeholder_expands_to_the_given_run(tmp_path):
    (tmp_path / "pool.jsonl").write_text('{"prompt": "1+1?", "answer": "2"}\n')
    with pytest.raises(DataError, match="run_dir"):
        load_records("jsonl:{run_dir}/pool.jsonl")
    recs = load_records("jsonl:{run_dir}/pool.jsonl", run_dir=tmp_path)
    assert [r.answer for r in recs] == ["2"]


def test_a_registered_source_reads_records_and_dicts(monkeypatch):
    from arcforge.data import sources

    monkeypatch.setattr(sources, "SOURCES", {})  # the registry as a fresh process has it
    with pytest.raises(DataError, match="bad source 'csv:x'"):
        parse_source("csv:x")
    rows = [QA, Record(text="kept as is", origin="mine"), {"prompt": "no answer"}]
    register_source("csv", lambda target: rows if target == "qa.csv" else [])
    assert parse_source("csv:qa.csv").kind == "csv"
    assert SourceSpec(source="csv:qa.csv").weight == 1.0  # a mixture entry accepts it
    recs = load_records("csv:qa.csv")  # the bad dict is skipped (and logged)
    assert [(r.answer, r.origin) for r in recs] == [("9", "csv:qa.csv#1"), (None, "mine")]
    with pytest.raises(DataError, match="csv:qa.csv#3: bad record"):
        load_records("csv:qa.csv", on_error="fatal")
    with pytest.raises(ValueError, match="built in"):
        register_source("jsonl", lambda target: [])
