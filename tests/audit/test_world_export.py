"""The world as files (arcforge.audit.export): suite files with id/prompt/reference, text files
holding what the stages read (the corpus whole, RL prompts without answers), the CLI."""

import json

import pytest
from typer.testing import CliRunner

from arcforge.audit.export import EXPORT_SUITES, export_world, source_file_name, training_texts
from arcforge.cli import app
from arcforge.world import WorldConfig, build_world

STAGES = [
    {"name": "pretrain", "kind": "pretrain", "sources": [{"source": "world:corpus"}]},
    {
        "name": "sft",
        "kind": "sft",
        "sources": [{"source": "world:sft/chat"}, {"source": "jsonl:{run_dir}/synth/gem.jsonl"}],
    },
    {"name": "rl", "kind": "rl", "sources": [{"source": "world:reasoning"}]},
    {
        "name": "distill",
        "kind": "distill",
        "teachers": [{"checkpoint": "sft", "sources": [{"source": "world:chat"}]}],
    },
]


@pytest.fixture(scope="module")
def small_world():
    return build_world(WorldConfig(seed=4, scale=0.05))


def _lines(path):
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_export_writes_every_suite_and_the_texts_stages_read(small_world, tmp_path):
    w = small_world
    summary = export_world(w, tmp_path, STAGES, counts={"explore": 5, "chains": 4})
    for suite in EXPORT_SUITES:
        for split in ("train", "test"):
            rows = _lines(tmp_path / "suites" / suite / f"{split}.jsonl")
            assert rows, (suite, split)
            for r in rows:
                assert {"id", "prompt", "reference"} <= set(r), (suite, r)
                assert r["prompt"].strip(), (suite, r["id"])
    assert len(_lines(tmp_path / "suites" / "chains" / "test.jsonl")) == 4
    test_math = _lines(tmp_path / "suites" / "reasoning" / "test.jsonl")
    assert [r["reference"] for r in test_math] == [
        t.validation.answer for t in w.tasks("reasoning", "test")
    ]
    swe = _lines(tmp_path / "suites" / "swe" / "test.jsonl")
    assert all(r["reference"].startswith(("diff", "---")) for r in swe)  # the fix patch

    corpus = [r["text"] for r in _lines(tmp_path / "text" / "world_corpus.jsonl")]
    assert corpus == [d.text for d in w.corpus()]
    rl = [r["text"] for r in _lines(tmp_path / "text" / "world_reasoning_prompts.jsonl")]
    assert rl == [t.instruction for t in w.tasks("reasoning", "train")]  # prompts only
    manifest = json.loads((tmp_path / "text" / "manifest.json").read_text())
    assert manifest["world:corpus"]["stages"] == ["pretrain"]
    assert manifest["world:chat (prompts)"]["stages"] == ["distill"]  # a teacher's source
    gem = manifest["jsonl:{run_dir}/synth/gem.jsonl"]
    assert gem["texts"] == 0 and "run" in gem["missing"]
    assert summary["text"] == manifest


def test_sft_reads_whole_conversations_and_run_files(small_world, tmp_path):
    (tmp_path / "synth").mkdir()
    msgs = [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"name": "replace_function", "arguments": {"code": "    return a + b\n"}}
            ],
        },
    ]
    (tmp_path / "synth" / "gem.jsonl").write_text(json.dumps({"messages": msgs}) + "\n")
    texts = training_texts(small_world, STAGES[1:2], run_dir=tmp_path)
    (gem,) = texts["jsonl:{run_dir}/synth/gem.jsonl"].texts
    assert "fix it" in gem and "    return a + b\n" in gem  # tool-call arguments are read
    chat = texts["world:sft/chat"].texts
    assert len(chat) == sum(d.kind == "chat" for d in small_world.sft_demos())
    first = next(d for d in small_world.sft_demos() if d.kind == "chat")
    assert first.messages[-1].content in chat[0]  # the reply SFT trains on


def test_source_file_names_are_plain():
    assert source_file_name("world:sft/chat") == "world_sft_chat"
    assert source_file_name("world:tir:fresh (prompts)") == "world_tir_fresh_prompts"


def test_cli_world_out_writes_suites_and_text(tmp_path):
    res = CliRunner().invoke(
        app, ["world", "configs/smoke.yaml", "world.scale=0.05", "--out", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "config.json").exists()  # the saved world, as before
    assert (tmp_path / "suites" / "code" / "test.jsonl").exists()
    assert (tmp_path / "text" / "world_corpus.jsonl").exists()
    assert "suite swe:" in res.output and "text world_corpus.jsonl" in res.output
    # the exported dir is checked against the config it was exported with
    out = tmp_path / "checks.json"
    res = CliRunner().invoke(
        app, ["eval", "contamination", str(tmp_path), "--no-baselines", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    checks = json.loads(out.read_text())["contamination"]
    assert set(checks["suites"]) == set(EXPORT_SUITES)
    assert checks["training_sources"]["world:corpus"]["stages"] == ["pretrain", "midtrain"]
