"""The contamination check: window shares, the half threshold, short references, duplicated
prompts, and a reference planted in a training source being found (arcforge.audit.contamination)."""

import json

import pytest

from arcforge.audit.contamination import (
    WINDOW,
    TrainingIndex,
    check_world,
    contaminated,
    suite_contamination,
    tokenize,
)
from arcforge.world import WorldConfig, build_world

WORDS = [f"w{i}" for i in range(60)]  # distinct tokens: every window is unique


def test_tokenizer_splits_words_and_punctuation():
    assert tokenize("def f(x): return x+1") == [
        "def",
        "f",
        "(",
        "x",
        ")",
        ":",
        "return",
        "x",
        "+",
        "1",
    ]


def test_copied_reference_is_contaminated_and_clean_one_is_not():
    ref = " ".join(WORDS[:30])  # 30 tokens -> 18 windows
    index = TrainingIndex(["some unrelated text", f"prefix {ref} suffix"])
    assert index.window_share(ref) == (1.0, 18)
    assert contaminated(index, ref)
    clean = TrainingIndex(["some unrelated text", " ".join(WORDS[30:])])
    assert clean.window_share(ref) == (0.0, 18)
    assert not contaminated(clean, ref)


def test_threshold_is_exactly_half():
    # a 20-token reference has 20 - 13 + 1 = 8 windows; training text holding its first 16
    # tokens holds windows 0..3 (4 of 8 = 0.5: contaminated), its first 15 tokens 3 of 8
    ref = " ".join(WORDS[:20])
    half = TrainingIndex([" ".join(WORDS[:16])])
    assert half.window_share(ref) == (0.5, 8)
    assert contaminated(half, ref)
    under = TrainingIndex([" ".join(WORDS[:15])])
    assert under.window_share(ref) == (3 / 8, 8)
    assert not contaminated(under, ref)


def test_windows_do_not_span_two_training_texts():
    ref = " ".join(WORDS[:WINDOW])  # exactly one window
    split = TrainingIndex([" ".join(WORDS[:7]), " ".join(WORDS[7:WINDOW])])
    assert not contaminated(split, ref)
    assert contaminated(TrainingIndex([" ".join(WORDS[:WINDOW])]), ref)


def test_short_reference_needs_its_whole_token_sequence():
    index = TrainingIndex(["the total is 1420 units", "x = foo ( bar )"])
    assert not contaminated(index, "42")  # inside a longer number: not a token match
    assert contaminated(index, "1420")
    assert contaminated(index, "foo(bar)")  # same tokens, other spacing
    assert not contaminated(index, "bar(foo)")


def test_duplicate_prompts_train_test_and_in_training_text():
    train = [{"id": "tr-0", "prompt": "What is 2 + 3?", "reference": "5"}]
    test = [
        {"id": "te-0", "prompt": "What is 2 + 3?", "reference": "5"},
        {"id": "te-1", "prompt": "Name the capital of Vrel.", "reference": "Oskar"},
        {"id": "te-2", "prompt": "Sort the list please.", "reference": "sorted(xs)"},
    ]
    index = TrainingIndex(["user: Name the capital of Vrel.\nassistant: Oskar"])
    r = suite_contamination(index, "toy", train, test)
    assert (r["n"], r["dup_train_test"], r["dup_in_training"]) == (3, 1, 1)
    assert r["ids"]["dup_train_test"] == ["te-0"]
    assert r["ids"]["dup_in_training"] == ["te-1"]
    assert r["ids"]["contaminated"] == ["te-1"]  # "Oskar" occurs as a token
    assert r["share"] == pytest.approx(1 / 3)


@pytest.fixture(scope="module")
def small_world():
    return build_world(WorldConfig(seed=3, scale=0.05))


def _stages(path):
    return [{"name": "mid", "kind": "midtrain", "sources": [{"source": f"jsonl:{path}"}]}]


def test_planted_reference_in_a_training_source_is_found(small_world, tmp_path):
    w = small_world
    target = w.tasks("terminal", "test")[0]
    clean, leaky = tmp_path / "clean.jsonl", tmp_path / "leaky.jsonl"
    clean.write_text(json.dumps({"text": "a page about nothing in particular"}) + "\n")
    leaky.write_text(json.dumps({"text": f"a how-to page\n{target.metadata['solution']}"}) + "\n")
    before = check_world(w, _stages(clean))
    after = check_world(w, _stages(leaky))
    for suite in ("terminal", "code", "swe", "chains"):  # nothing of them in the clean text
        assert before["suites"][suite]["contaminated"] == 0, suite
    t = after["suites"]["terminal"]
    assert target.id in t["ids"]["contaminated"]
    assert t["share"] >= 1 / t["n"]
    assert after["training_sources"][f"jsonl:{leaky}"] == {
        "texts": 1,
        "stages": ["mid"],
        "missing": None,
    }


def test_report_shows_contamination_baselines_and_seconds(small_world, tmp_path):
    from arcforge.audit.checks import run_audits
    from arcforge.report import write_report
    from arcforge.run_config import dump_config, load_config

    cfg = load_config("configs/smoke.yaml", ["world.seed=3", "world.scale=0.05"])
    (tmp_path / "config.yaml").write_text(dump_config(cfg))
    small_world.save(tmp_path / "world")
    (tmp_path / "world" / "DONE").write_text("ok")
    first = cfg.stages[0].name
    (tmp_path / first).mkdir()
    (tmp_path / first / "DONE").write_text(json.dumps({"seconds": 12.0}))
    (tmp_path / "eval").mkdir()
    res = {"score": 0.25, "ci": [0.1, 0.4], "n": 20}
    (tmp_path / "eval" / f"{first}.json").write_text(json.dumps({"code": res, "lm_loss": res}))
    (tmp_path / "timing.json").write_text(
        json.dumps({"setup_seconds": 3.0, "eval_seconds": {first: 5.0}})
    )
    (tmp_path / "checks").mkdir()  # a cached baselines pass (its execution is tested elsewhere)
    base = {
        "n": 8,
        "n_test": 20,
        "majority": 0.0,
        "nearest": 0.125,
        "majority_answer": "x",
        "executed": True,
        "seconds": 1.0,
    }
    (tmp_path / "checks" / "baselines.json").write_text(
        json.dumps({"suites": {"code": base}, "max_exec": 8, "seconds": 2.0})
    )
    assert run_audits(tmp_path) == {}
    md = write_report(tmp_path).read_text()
    rep = json.loads((tmp_path / "report.json").read_text())
    cont = rep["contamination"]["suites"]
    assert (tmp_path / "checks" / "contamination.json").exists()  # measured once, cached
    assert set(cont) >= {"code", "swe", "terminal", "reasoning"}
    assert rep["stages"][0]["seconds"] == 12.0 and rep["stages"][0]["eval_seconds"] == 5.0
    # setup 3 + stage 12 + its eval 5 + baselines 2 + the contamination check's own seconds
    assert rep["total_seconds"] == pytest.approx(22.0 + rep["contamination"]["seconds"])
    row = next(ln for ln in md.splitlines() if ln.startswith("| code |"))
    assert f"| {cont['code']['share']:.2f} (" in row
    under = md.splitlines()[md.splitlines().index(row) + 1]
    assert under.startswith("| ↳ baselines |") and "nearest 0.125 (n=8, executed)" in under
    # the full table lists every checked suite, with why a figure is expected by design
    rea = next(ln for ln in md.splitlines() if ln.startswith("| reasoning |"))
    assert "small integers" in rea


def test_external_suites_are_checked_on_the_items_they_score():
    """A BFCL item's question pasted into training text is a prompt duplicate, a text naming
    an item's function counts in `names_in_training`, and reasoning-gym items are checked
    too; the figures cover exactly the drawn items. Needs bfcl-eval's virtualenv."""
    from arcforge.audit.contamination import TrainingIndex, external_contamination
    from arcforge.eval.external import bfcl, open_suite

    if not bfcl.DEFAULT_PYTHON.exists():
        pytest.skip("bfcl-eval's virtualenv is missing: run `make setup-bfcl`")
    name = "bfcl:simple_python?n=5&seed=1"
    items = open_suite(name).contamination_items()
    assert len(items) == 5 and all(i["prompt"] and i["reference"] for i in items)
    texts = [f"Q: {items[0]['prompt']} A: fine", f"then call {items[1]['names'][0]} twice"]
    res = external_contamination(TrainingIndex(texts), name)
    assert res["n"] == 5
    assert res["ids"]["dup_in_training"] == [items[0]["id"]]
    assert items[1]["id"] in res["ids"]["names_in_training"]
    clean = external_contamination(TrainingIndex(["nothing relevant here"]), name)
    assert clean["dup_in_training"] == clean["contaminated"] == clean["names_in_training"] == 0
    rg = open_suite("reasoning_gym:spell_backward?n=4&seed=2").contamination_items()
    hit = external_contamination(
        TrainingIndex([rg[2]["prompt"]]), "reasoning_gym:spell_backward?n=4&seed=2"
    )
    assert hit["ids"]["dup_in_training"] == [rg[2]["id"]]
    bad = external_contamination(TrainingIndex(["x"]), "bfcl:no_such_category")
    assert bad["n"] == 0 and "no_such_category" in bad["unchecked"]
