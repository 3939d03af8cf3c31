"""Held-out means held out, checked on what training actually reads: the from-scratch config's
stages over the shared test world. For code, SWE and explore no test reference shares half its
13-token windows with training text, no test prompt is a train prompt, held-out code bodies
(identifiers normalised) appear in no training text, and test references are distinct."""

import re
from pathlib import Path

import pytest

from arcforge.audit.contamination import check_world
from arcforge.audit.export import suite_items, training_texts
from arcforge.run_config import load_config

ROOT = Path(__file__).resolve().parents[2]
HELD_OUT = ("code", "swe", "explore")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@pytest.fixture(scope="module")
def stages():
    return load_config(ROOT / "configs" / "scratch.yaml").stages


@pytest.fixture(scope="module")
def report(world, stages):
    return check_world(world, stages)


@pytest.mark.parametrize("suite", HELD_OUT)
def test_no_held_out_reference_or_prompt_in_training_text(report, suite):
    r = report["suites"][suite]
    assert r["n"] > 0
    assert r["contaminated"] == 0, r["ids"]["contaminated"]
    assert r["dup_train_test"] == 0 and r["dup_in_training"] == 0, r["ids"]


@pytest.mark.parametrize("suite", HELD_OUT)
def test_test_references_are_distinct(world, suite):
    test = suite_items(world)[suite]["test"]
    refs = [r.get("solution") or r["reference"] for r in test]
    assert len(set(refs)) >= 0.9 * len(refs)


def _normalised(code: str) -> str:
    return " ".join(_IDENT.sub("_", code).split())


def test_held_out_code_bodies_are_in_no_training_text(world, stages):
    texts = [t for tt in training_texts(world, stages).values() for t in tt.texts]
    blob = "\n".join(_normalised(t) for t in texts)
    for task in world.tasks("code", "test"):
        body = _normalised(task.metadata["body"])
        assert body not in blob, task.id


def test_a_leak_is_caught(world, stages):
    """The check is not vacuous: a held-out code solution copied into the corpus is flagged."""
    leaked = world.tasks("code", "test")[0]
    world.corpus_docs.append(
        type(world.corpus_docs[0])("leak-0", leaked.metadata["solution"], "code")
    )
    try:
        r = check_world(world, stages)["suites"]["code"]
        assert leaked.id in r["ids"]["contaminated"]
    finally:
        world.corpus_docs.pop()
