"""`reasoning_gym:` suites scored by each dataset's own `score_answer`.

No model is involved: the responders are written here, scripted from the dataset's own true
answers (`entry["answer"]`) or a wrong one, and reply in the format the suite's question asks
for (a final `Answer:` line).
"""

from __future__ import annotations

import pytest

from arcforge.errors import UserError
from arcforge.eval.external import open_suite

pytest.importorskip("reasoning_gym")


def _truth_responder(suite, wrong: bool = False):
    truth = {r.task.instruction: r.task.metadata["rg_entry"]["answer"] for r in suite.records}

    def respond(messages, tools=None):
        answer = str(truth[messages[-1]["content"]])
        if wrong:  # not containing the truth: the default scorer gives partial credit for that
            answer = "zzz"
        return {"role": "assistant", "content": f"Let me think.\nAnswer: {answer}"}

    return respond


@pytest.mark.parametrize("dataset", ["chain_sum", "letter_counting", "basic_arithmetic"])
def test_true_answers_score_one_wrong_ones_zero(dataset):
    suite = open_suite(f"reasoning_gym:{dataset}?n=12&seed=4")
    good = suite.run(_truth_responder(suite))
    assert good.meta["n"] == 12 and good.meta["seed"] == 4
    assert [i.score for i in good.items] == [1.0] * 12, [i.detail for i in good.items]
    bad = suite.run(_truth_responder(suite, wrong=True), baselines=False)
    assert [i.score for i in bad.items] == [0.0] * 12
    assert 0.0 <= good.baselines["majority_answer"] < 1.0


def test_draw_is_seeded():
    a = open_suite("reasoning_gym:chain_sum?n=5&seed=1").records
    b = open_suite("reasoning_gym:chain_sum?n=5&seed=1").records
    c = open_suite("reasoning_gym:chain_sum?n=5&seed=2").records
    assert [r.prompt for r in a] == [r.prompt for r in b] != [r.prompt for r in c]


def test_a_failing_responder_fails_its_items_not_the_run():
    def broken(messages, tools=None):
        raise TimeoutError("endpoint timed out")

    res = open_suite("reasoning_gym:chain_sum?n=3").run(broken, baselines=False)
    assert res.score == 0.0 and "timed out" in res.items[0].detail["error"]


@pytest.mark.parametrize(
    "name, words",
    [
        ("reasoning_gym:nope", ["nope"]),
        ("reasoning_gym:chain_sum?n=abc", ["n and seed"]),
        ("reasoning_gym:chain_sum?n=0", ["positive"]),
        ("reasoning_gym:chain_sum?mode=fc", ["mode"]),
    ],
)
def test_bad_names_are_user_errors(name, words):
    with pytest.raises(UserError) as e:
        open_suite(name)
    assert all(w in str(e.value) for w in words)
