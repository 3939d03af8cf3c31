"""LLMClient (the official `openai` client underneath) over real HTTP against the ReplayServer:
retries, errors, n, the API key, JSON repair turns; and parse_json_loose on the shapes small
models actually write. The `openai` client's own backoff (0.5 s, doubling) paces the retry
tests, about 3 s in all."""

from __future__ import annotations

import socket

import pytest

from arcforge.errors import UserError
from arcforge.llm import LLMClient, LLMError, parse_json_loose
from arcforge.replay import ReplayServer

USER = [{"role": "user", "content": "give me json"}]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("<think>\nmaybe {'x': 0}\n</think>\nSure: {\"a\": [1, 2]}", {"a": [1, 2]}),
        ('Here you go:\n```json\n{"b": "c"}\n```\nDone.', {"b": "c"}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),  # trailing commas
        (
            "{'name': 'O\\'Brien', 'ok': True, 'v': None, 'f': False}",
            {"name": "O'Brien", "ok": True, "v": None, "f": False},
        ),
        ('prose [1, {"k": "a } b"}] more prose {"z": 1}', [1, {"k": "a } b"}]),
        ('{\'say\': "he said \\"hi\\"\\n"}', {"say": 'he said "hi"\n'}),
        ('reasoning text </think> {"late": 1e3}', {"late": 1000.0}),
        ('{"true_name": "None of True"}', {"true_name": "None of True"}),  # words in strings kept
    ],
)
def test_parse_json_loose(text, expected):
    assert parse_json_loose(text) == expected


@pytest.mark.parametrize(
    "text, match",
    [
        ("no braces here", "no JSON object"),
        ('{"a": [1, 2}', "mismatched"),
        ('{"a": 1', "unbalanced"),
        ("{a: 1}", "invalid JSON even after repair"),
    ],
)
def test_parse_json_loose_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_json_loose(text)


def test_retries_then_succeeds_and_sends_the_request():
    with ReplayServer(["hello"], fail_first=2) as srv:
        client = LLMClient(srv.base_url, "m", api_key_env=None)
        assert client.chat(USER, temperature=0.3, max_tokens=7, seed=3) == ["hello"]
        assert len(srv.requests) == 3  # two 503s, then the answer
        body = srv.requests[-1]
        assert body["model"] == "m" and body["messages"] == USER
        assert (body["temperature"], body["max_tokens"], body["seed"], body["n"]) == (0.3, 7, 3, 1)


def test_gives_up_after_max_retries_naming_the_endpoint():
    with ReplayServer(["never"], fail_first=10) as srv:
        client = LLMClient(srv.base_url + "/v1/", "m", max_retries=2)
        with pytest.raises(LLMError, match=r"/v1/chat/completions failed after 3 attempts.*503"):
            client.chat(USER)
        assert len(srv.requests) == 3
    assert issubclass(LLMError, UserError)  # the CLI prints one line


def test_client_error_is_not_retried():
    with ReplayServer([]) as srv:  # nothing canned: HTTP 410
        with pytest.raises(LLMError, match="refused the request.*410.*no canned response"):
            LLMClient(srv.base_url, "m").chat(USER)
        assert len(srv.requests) == 1


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens
    client = LLMClient(f"http://127.0.0.1:{port}", "m", max_retries=1)
    with pytest.raises(LLMError, match="failed after 2 attempts.*ConnectError"):
        client.chat(USER)
    with pytest.raises(LLMError, match="http://"):
        LLMClient("localhost:8000", "m")


def test_n_replies_and_api_key(monkeypatch):
    monkeypatch.setenv("ARCFORGE_TEST_KEY", "sekret")
    with ReplayServer(lambda msgs: f"echo {msgs[-1]['content']}") as srv:
        client = LLMClient(srv.base_url, "m", api_key_env="ARCFORGE_TEST_KEY")
        assert client.chat(USER, n=3) == ["echo give me json"] * 3
        assert srv.headers[0]["authorization"] == "Bearer sekret"
    with ReplayServer(["x"]) as srv:
        LLMClient(srv.base_url, "m", api_key_env="ARCFORGE_UNSET_VAR_123").chat(USER)
        assert srv.headers[0]["authorization"] == "Bearer EMPTY"  # no key: vLLM's placeholder


def test_chat_json_repairs_with_the_parse_error():
    replies = ["I cannot do JSON today", "```json\n{'a': True, 'b': [1, 2,],}\n```"]
    with ReplayServer(replies) as srv:
        out = LLMClient(srv.base_url, "m").chat_json(USER, retries=2)
        assert out == {"a": True, "b": [1, 2]}
        second = srv.requests[1]["messages"]
        assert second[:1] == USER and second[1] == {
            "role": "assistant",
            "content": "I cannot do JSON today",
        }
        assert "no JSON object" in second[2]["content"]


def test_chat_json_gives_up_with_a_clip_of_the_reply():
    with ReplayServer(["still not json"] * 3) as srv:
        with pytest.raises(LLMError, match="no parsable JSON after 2 tries.*still not json"):
            LLMClient(srv.base_url, "m").chat_json(USER, retries=1)
        assert len(srv.requests) == 2
