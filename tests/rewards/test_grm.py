"""The generative reward model against a scripted OpenAI-compatible judge on loopback (real
HTTP through arcforge.replay.ReplayServer): score parsing, averaging over k noisy samples,
re-asking on unparsable replies, HTTP retries, and the rubric routing."""

import math

import pytest

from arcforge.llm import LLMClient
from arcforge.replay import ReplayServer
from arcforge.rewards.anchors import anchor_tasks
from arcforge.rewards.grm import GenerativeRM, parse_score
from arcforge.types import Task, Validation

TASK = Task(
    "t1",
    "chat",
    "Write one sentence about Ann. Mention the word 'Ann'.",
    validation=Validation(constraints=[{"type": "include", "word": "Ann"}]),
)


@pytest.mark.parametrize(
    "text, want",
    [
        ("The reply follows the rules.\nScore: 8", 8.0),
        ("**Score:** 6/10 because it is terse", 6.0),
        ('{"reason": "fine", "score": 7}', 7.0),
        ("<think>maybe a 2? no.</think>Rating = 9.5", 9.5),
        ("Solid answer overall, I'd give it 4/10.", 4.0),
        ("Good tone.\n\n7", 7.0),
        ("Score: 3, then on reflection Score: 5", 5.0),  # the last score counts
        ("Score: 12", None),  # outside the 1-10 scale
        ("It is a good reply.", None),
    ],
)
def test_parse_score(text, want):
    assert parse_score(text) == want


def grm(srv, **kw) -> GenerativeRM:
    client = LLMClient(srv.base_url, "judge", api_key_env=None)
    return GenerativeRM(client, workers=1, **kw)


def test_k_noisy_judgements_are_averaged():
    replies = ["Follows the instruction.\nScore: 8", "**Score:** 6/10", '{"score": 7}']
    with ReplayServer(replies) as srv:
        r = grm(srv, k=3).score(TASK, "Ann is here.")
        bodies = srv.requests
    # mean of 8, 6, 7 = 7 -> (7 - 1) / 9 = 0.666667
    assert r.score == pytest.approx(6 / 9)
    assert r.details["samples"] == [8.0, 6.0, 7.0] and r.details["unparsable"] == 0
    assert r.details["std"] == pytest.approx(math.sqrt(2 / 3))
    assert len(bodies) == 3 and len({b["seed"] for b in bodies}) == 3  # distinct samples
    system, user = bodies[0]["messages"]
    assert "Emotional intelligence" in system["content"] and "Score: N" in system["content"]
    assert TASK.instruction in user["content"] and "Ann is here." in user["content"]


def test_unparsable_replies_are_re_asked_and_http_errors_retried():
    replies = ["I think it is quite good.", "Score: 9", "no idea", "still no idea", "Score: 3"]
    with ReplayServer(replies, fail_first=2) as srv:  # two HTTP 503s first
        r = grm(srv, k=2, retries=2).score(TASK, "Ann.")
        n = len(srv.requests)
    # sample 1: unparsable, then 9; sample 2: two unparsable, then 3 -> mean 6 -> 5/9
    assert r.score == pytest.approx(5 / 9)
    assert r.details["unparsable"] == 3 and r.details["samples"] == [9.0, 3.0]
    assert n == 2 + 5  # the 503s were retried by the client, each reply asked once


def test_no_parsable_score_gives_nan_with_the_reason():
    with ReplayServer(lambda msgs: "a fine reply, really") as srv:
        r = grm(srv, k=2, retries=1).score(TASK, "Ann.")
        assert len(srv.requests) == 4
    assert math.isnan(r.score) and "no parsable score" in r.details["error"]


def test_rubric_follows_the_task_category():
    translation = next(t for t in anchor_tasks() if t.metadata["category"] == "translation")
    seen = []

    def judge(msgs):
        seen.append(msgs[0]["content"])
        return "Score: 10"

    with ReplayServer(judge) as srv:
        rs = grm(srv, k=1).score_batch([translation, TASK], ["It rains.", "Ann."])
    assert [r.score for r in rs] == [1.0, 1.0]
    assert [r.details["category"] for r in rs] == ["translation", "writing"]
    assert any("meaning fully preserved" in s for s in seen)
    assert any("clear, specific" in s for s in seen)
