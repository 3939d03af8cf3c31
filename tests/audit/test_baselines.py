"""Trivial baselines (arcforge.audit.baselines): the nearest train item, the majority answer, and
both scored with the suite's own scorer, by execution for code."""

from dataclasses import replace

import pytest

from arcforge.audit.baselines import nearest_indices, suite_baselines, world_baselines
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Task, Validation
from arcforge.world import WorldConfig, build_world


def _math(i: int, prompt: str, answer: str) -> Task:
    return Task(f"m-{i}", "math", prompt, validation=Validation(answer=answer))


def test_nearest_prefers_the_exact_duplicate_then_bm25():
    train = ["how many apples does Ada have", "how many pears does Bo sell", "apples apples"]
    test = ["how many pears does Bo sell", "pears sold by Bo: how many", "zzz"]
    near = nearest_indices(train, test)
    assert near[:2] == [1, 1]
    assert 0 <= near[2] < 3
    assert nearest_indices([], test) == [-1, -1, -1]


def test_majority_and_nearest_scored_like_the_suite():
    train = [
        _math(0, "Ada has 3 apples and gets 4 more. How many?", "7"),
        _math(1, "Bo has 10 pears and sells 2. How many are left?", "8"),
        _math(2, "Cy has 5 plums and eats 3. How many are left?", "2"),
        _math(3, "Di has 1 fig and gets 6 more. How many?", "7"),
    ]
    test = [
        replace(train[1], id="t-0"),  # a duplicated prompt: nearest gives its answer
        _math(5, "Ed has 9 nuts and gets 2 more. How many in all?", "11"),
        _math(6, "Flo has 4 eggs and gets 3 more. How many?", "7"),
    ]
    r = suite_baselines(None, "reasoning", train, test)
    # majority "7" (2 of 4 train answers) is right on t-0? no (8), item 5? no (11), item 6: yes
    assert r["majority_answer"] == "7"
    assert r["majority"] == pytest.approx(1 / 3)
    # nearest: t-0 -> its duplicate ("8", right); item 5 and 6 -> a "gets ... more" item ("7")
    assert r["nearest"] >= 1 / 3
    assert r["n"] == 3 and not r["executed"]
    assert suite_baselines(None, "reasoning", train, test[:1])["nearest"] == 1.0


def test_suites_without_a_scorer_or_items_give_none():
    assert suite_baselines(None, "chains", [_math(0, "a", "1")], [_math(1, "b", "1")]) is None
    assert suite_baselines(None, "reasoning", [], [_math(1, "b", "1")]) is None


@pytest.fixture(scope="module")
def small_world():
    return build_world(WorldConfig(seed=6, scale=0.05))


def test_text_suites_on_a_world(small_world):
    res = world_baselines(small_world, {"explore": 4, "chains": 2}, max_exec=0)
    for s in ("reasoning", "tir", "tool", "chat", "long_context", "search", "explore"):
        r = res["suites"][s]
        assert 0.0 <= r["majority"] <= 1.0 and 0.0 <= r["nearest"] <= 1.0, s
        assert s == "explore" or r["n"] == len(small_world.tasks(s, "test")), s
    assert "chains" not in res["suites"]  # no text answer
    assert "code" not in res["suites"]  # max_exec=0: no executed items


@pytest.mark.skipif(not bwrap_available(), reason="needs bubblewrap for the code sandbox")
def test_code_nearest_executes_the_duplicated_items_solution(small_world):
    train = small_world.tasks("code", "train")[:6]
    dup = replace(train[2], id="code-test-dup")  # its prompt is a train prompt
    other = small_world.tasks("code", "test")[0]
    r = suite_baselines(small_world, "code", train, [dup, other])
    assert r["executed"] and r["n"] == 2
    assert r["nearest"] >= 0.5  # the duplicate passes its hidden tests with the train body
