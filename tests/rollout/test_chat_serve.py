"""`arcforge serve`'s /v1/chat/completions with a real tiny LocalEngine model over loopback.

The tiny model is first taught (a 1-layer d=32 model, < 200 full-batch steps on
two short sequences, a few seconds) to answer two prompts
with fixed replies: one with a think block and a tool call, one with a JSON object. Greedy
decoding then reproduces them, so the test can check the whole path: OpenAI messages -> our
chat template -> engine -> decode -> parse -> OpenAI `tool_calls` / content, and LLMClient on
top of it.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest
import torch
import uvicorn
from transformers import LlamaForCausalLM

from arcforge.chat import ThinkingConfig, render_ids
from arcforge.llm import LLMClient
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.chat_serve import reply_message
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.serve import create_app
from arcforge.types import Message, ToolCall

ADD_SCHEMA = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {}}},
}
CALL = [
    Message("user", "use the tool on 2 and 3"),
    Message(
        "assistant", "", reasoning="I add them.", tool_calls=[ToolCall("add", {"a": 2, "b": 3})]
    ),
]
JSON = [Message("user", "status as json"), Message("assistant", '{"ok": true, "n": 4}')]


@pytest.fixture(scope="module")
def served():
    torch.manual_seed(0)
    corpus = [m.content or "" for m in CALL + JSON] + [json.dumps(ADD_SCHEMA), "I add them."]
    tok = train_tokenizer(corpus * 8, vocab_size=500)
    small = {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "intermediate_size": 64,
    }
    model = LlamaForCausalLM(
        build_config("nano", len(tok), 256, pad_token_id=tok.pad_token_id, **small)
    )
    rows = [render_ids(m, tok, None, ThinkingConfig()) for m in (CALL, JSON)]
    width = max(len(r.input_ids) for r in rows)
    pad = tok.pad_token_id
    ids = torch.tensor([r.input_ids + [pad] * (width - len(r.input_ids)) for r in rows])
    mask = torch.tensor([r.loss_mask + [0] * (width - len(r.loss_mask)) for r in rows])
    labels = ids.masked_fill(mask == 0, -100)  # train on the assistant replies only
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2)
    for _ in range(200):
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.02:
            break
    model.eval()
    engine = LocalEngine(model, pad_token_id=tok.pad_token_id)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(engine, "tiny", tok)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", loss.item()
    srv.should_exit = True
    thread.join(timeout=10)


def test_tool_call_reply_comes_back_as_openai_tool_calls(served):
    url, loss = served
    assert loss < 0.05, f"the tiny model did not memorise its replies (loss {loss:.3f})"
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": CALL[0].content}],
        "temperature": 0,
        "max_tokens": 64,
    }
    out = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).json()
    with_tools = httpx.post(f"{url}/v1/chat/completions", json={**body, "tools": [ADD_SCHEMA]})
    extra = with_tools.json()["usage"]["prompt_tokens"] - out["usage"]["prompt_tokens"]
    assert extra > len(json.dumps(ADD_SCHEMA)) // 8  # the schema is rendered into the prompt
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["reasoning_content"] == "I add them." and msg["content"] == ""
    call = msg["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert out["usage"]["completion_tokens"] > 0


def test_llm_client_against_the_served_model(served):
    url, _ = served
    client = LLMClient(url, "tiny", api_key_env=None)
    assert client.chat_json([{"role": "user", "content": JSON[0].content}]) == {"ok": True, "n": 4}
    # a follow-up turn with an OpenAI-shaped assistant tool call and a tool result renders fine
    history = [
        {"role": "user", "content": CALL[0].content},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    texts = client.chat(history, max_tokens=8, n=2, temperature=1.0, seed=1)
    assert len(texts) == 2


def test_bad_requests_are_400_naming_the_problem(served):
    url, _ = served
    bad_role = {"messages": [{"role": "wizard", "content": "hi"}]}
    r = httpx.post(f"{url}/v1/chat/completions", json=bad_role)
    assert r.status_code == 400 and "messages[0]" in r.text and "role" in r.text
    bad_tool = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}
    r = httpx.post(f"{url}/v1/chat/completions", json=bad_tool)
    assert r.status_code == 400 and "tools[0]" in r.text


def test_reply_message_parses_think_calls_and_errors():
    text = '<think>\nplan\n</think>\nok<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    msg, calls = reply_message(text + '<tool_call>{"bad json</tool_call><|end|>', 0)
    assert calls and msg["reasoning_content"] == "plan" and msg["content"] == "ok"
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["f"]
    assert "tool call 2" in msg["arcforge_errors"][0]


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", max_retries=0, timeout=60)


def test_official_openai_client_gets_tool_calls_and_content(served):
    url, _ = served
    client = openai_client(url)
    out = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": CALL[0].content}],
        temperature=0,
        max_tokens=64,
    )
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and out.object == "chat.completion"
    assert choice.message.model_extra["reasoning_content"] == "I add them."
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
    reply = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": JSON[0].content}], temperature=0
    )
    assert reply.choices[0].message.content == JSON[1].content
    assert reply.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("prompt", [CALL[0].content, JSON[0].content])
def test_streaming_with_the_openai_client_equals_the_whole_reply(served, prompt):
    url, _ = served
    client = openai_client(url)
    kw = {"model": "tiny", "messages": [{"role": "user", "content": prompt}], "temperature": 0}
    whole = client.chat.completions.create(**kw)
    chunks = list(
        client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True})
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    content = "".join(d.content or "" for d in deltas)
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    calls = [(t.function.name, t.function.arguments) for d in deltas for t in d.tool_calls or []]
    msg = whole.choices[0].message
    assert deltas[0].role == "assistant" and finish == [whole.choices[0].finish_reason]
    assert content == (msg.content or "")
    assert reasoning == (msg.model_extra.get("reasoning_content") or "")
    assert calls == [(t.function.name, t.function.arguments) for t in msg.tool_calls or []]
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
