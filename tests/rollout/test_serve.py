"""ServerEngine against `arcforge serve`'s app over loopback: same tokens and logprobs as the
LocalEngine it wraps. uvicorn runs in a background thread on a free port."""

import socket
import threading
import time

import httpx
import pytest
import torch
import uvicorn
from tiny_models import small_llama
from torch.testing import assert_close

from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.http import ServerEngine, parse_choice
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.serve import create_app

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [20]]


@pytest.fixture(scope="module")
def model():
    return small_llama()


@pytest.fixture(scope="module")
def server(model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = LocalEngine(model, pad_token_id=0)
    srv = uvicorn.Server(
        uvicorn.Config(create_app(engine, "tiny"), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}", engine
    srv.should_exit = True
    thread.join(timeout=10)


def test_routes(server):
    url, _ = server
    assert httpx.get(f"{url}/health").json() == {"status": "ok", "version": 0}
    assert httpx.get(f"{url}/v1/models").json()["data"][0]["id"] == "tiny"
    r = httpx.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": "hello"})
    assert r.status_code == 400 and "tokenizer" in r.text


def test_server_engine_equals_local_engine(server, model):
    url, _ = server
    client = ServerEngine(url, "tiny")
    local = LocalEngine(model, pad_token_id=0)
    for params in [
        SamplingParams(max_new_tokens=8, temperature=0.0, stop_token_ids=[17]),
        SamplingParams(max_new_tokens=8, seed=5, n=2),
    ]:
        remote, mine = client.generate(PROMPTS, params), local.generate(PROMPTS, params)
        assert len(remote) == len(PROMPTS) * params.n
        for a, b in zip(remote, mine):
            assert (a.token_ids, a.finish_reason) == (b.token_ids, b.finish_reason)
            assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-6, rtol=0)


def test_server_weight_update(server, model, tmp_path):
    url, engine = server
    with pytest.raises(NotImplementedError, match="weight_sync_dir"):
        ServerEngine(url, "tiny").load_weights(model.state_dict(), 1)
    new = {k: v + 0.3 * torch.randn_like(v) for k, v in model.state_dict().items()}
    client = ServerEngine(url, "tiny", weight_sync_dir=str(tmp_path))
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    before = client.generate(PROMPTS, params)
    client.load_weights(new, version=3)
    assert client.version == 3 and engine.version == 3
    after = client.generate(PROMPTS, params)
    reference = LocalEngine(model, pad_token_id=0)
    reference.load_weights(new, 3)
    assert [c.token_ids for c in after] == [
        c.token_ids for c in reference.generate(PROMPTS, params)
    ]
    assert [c.token_ids for c in after] != [c.token_ids for c in before]
    engine.load_weights(model.state_dict(), 0)  # leave the shared server as it was


def test_parse_vllm_choice():
    # vLLM's shape with return_tokens_as_token_ids and no token_ids field
    choice = {
        "index": 0,
        "text": "",
        "finish_reason": "stop",
        "logprobs": {
            "tokens": ["token_id:12", "token_id:7"],
            "token_logprobs": [-0.5, -1.25],
            "top_logprobs": None,
        },
    }
    c = parse_choice(choice)
    assert (c.token_ids, c.logprobs, c.finish_reason) == ([12, 7], [-0.5, -1.25], "stop")
    with pytest.raises(RuntimeError, match="token ids"):
        parse_choice({"index": 0, "logprobs": {"tokens": ["hi"], "token_logprobs": [-1.0]}})


def test_server_engine_refuses_tempered_logprobs():
    """A server returns raw logprobs: asking it for tempered ones fails before any request."""
    client = ServerEngine("http://127.0.0.1:9", "tiny")
    with pytest.raises(ValueError, match="tempered_logprobs needs the LocalEngine"):
        client.generate([[1, 2]], SamplingParams(tempered_logprobs=True, temperature=0.7))
