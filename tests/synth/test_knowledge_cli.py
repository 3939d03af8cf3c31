"""`arcforge synth search | abe | gem`: outputs and summaries on disk, LLM steps against the
replay server, and bad input as one line with exit status 2."""

import json
import sys

import pytest
from typer.testing import CliRunner

from arcforge.cli import app, main
from arcforge.data.sources import load_records
from arcforge.replay import ReplayServer
from arcforge.types import Task
from arcforge.world import WorldConfig, build_world

runner = CliRunner()


def _ok(args):
    r = runner.invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_search_from_pages_file(tmp_path):
    w = build_world(WorldConfig(seed=7, scale=0.1))
    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in w.pages)
    )
    out = _ok(["synth", "search", "--pages", str(pages), "--out", str(tmp_path / "s"), "--n", "1"])
    assert out["kept"] == 1
    tasks = [
        Task.from_dict(json.loads(x)) for x in (tmp_path / "s/tasks.jsonl").read_text().splitlines()
    ]
    assert all(t.kind == "search" and t.metadata["hops"] >= 3 for t in tasks)
    summary = json.loads((tmp_path / "s/summary.json").read_text())
    assert summary["kept"] == 1 and summary["graph"]["pages"] == len(w.pages)
    assert (tmp_path / "s/wkg.jsonl").stat().st_size > 0


DECOMP = json.dumps(
    {
        "scenario": "single_hop",
        "question": "Who makes the Zeta phone?",
        "answer": "Norco",
        "sub_questions": [
            {
                "id": "q1",
                "question": "Who makes the Zeta phone?",
                "answer": "Norco",
                "depends_on": None,
            }
        ],
    }
)
DOCS = json.dumps(
    {
        "tools": [
            {
                "sub_question": "q1",
                "name": "get_maker",
                "description": "Maker.",
                "parameters": {
                    "type": "object",
                    "properties": {"product": {"type": "string"}},
                    "required": ["product"],
                },
                "arguments": {"product": "Zeta phone"},
            }
        ]
    }
)
MATH = "Question: How many?\nSolution: 3 * 9 = 27. 7 - 2 = 5, so 27 - 2 = 25.\nAnswer: 25"
HOWTO = "Repot a plant\n1. Water the plant.\n2. Remove it from the pot.\n3. Add soil."
PROSE = "Vrystad is located in Hooeiia."


def test_abe_from_descriptions_through_an_llm(tmp_path):
    (tmp_path / "d.txt").write_text("Find where the Zeta phone's maker is.\n")
    with ReplayServer([DECOMP, DOCS]) as srv:
        out = _ok(
            [
                "synth",
                "abe",
                "--descriptions",
                str(tmp_path / "d.txt"),
                "--llm-url",
                srv.base_url,
                "--out",
                str(tmp_path / "a"),
                "--n",
                "1",
                "--ops",
                "",
            ]
        )
    assert out["kept"] == 1
    (line,) = (tmp_path / "a/tasks.jsonl").read_text().splitlines()
    assert Task.from_dict(json.loads(line)).kind == "abe"


def test_gem_from_text_files(tmp_path):
    for name, text in (("m.txt", MATH), ("h.md", HOWTO), ("p.txt", PROSE)):
        (tmp_path / "texts").mkdir(exist_ok=True)
        (tmp_path / "texts" / name).write_text(text)
    out = _ok(["synth", "gem", "--texts", str(tmp_path / "texts"), "--out", str(tmp_path / "g")])
    assert out["kept"] == 2 and out["dropped"] == {"filter": {"not_procedure": 1}}
    recs = load_records(f"jsonl:{tmp_path / 'g/sft.jsonl'}", on_error="fatal")  # the SFT reader
    assert len(recs) == 2 and all(r.messages[-1].role == "assistant" for r in recs)
    assert sorted(r.meta["tools"][0] for r in recs) == ["calculator", "water_plant"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["synth", "search", "--pages", "nope.jsonl", "--out", "x"], "pages file not found"),
        (["synth", "search", "--hops", "three", "--out", "x"], "--hops must be"),
        (["synth", "gem", "--texts", "nope.txt", "--out", "x"], "texts not found"),
    ],
)
def test_bad_input_is_one_line_exit_2(monkeypatch, capsys, args, message):
    monkeypatch.setattr(sys, "argv", ["arcforge", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
