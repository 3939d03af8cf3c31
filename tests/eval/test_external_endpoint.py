"""`EndpointResponder` against a real OpenAI-compatible server: `arcforge serve`'s app over
loopback, serving a random tiny model (tests/tiny_models.end_biased_nano: short replies).

The model is untrained, so its scores mean nothing; what is checked is the wire path: the
suites' requests (with BFCL's tools passed through) reach the server, its replies come back as
assistant messages, and every item is scored by the benchmark's checker without a request error.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from tiny_models import end_biased_nano

from arcforge.eval.external import bfcl, open_suite
from arcforge.eval.external.endpoint import EndpointResponder
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.serve import create_app


@pytest.fixture(scope="module")
def url():
    corpus = ["What is 3 + 4? Answer: 7", '{"name": "calculate_area", "arguments": {"base": 10}}']
    tok = train_tokenizer(corpus * 8, vocab_size=400)
    engine = LocalEngine(end_biased_nano(tok, 8192), pad_token_id=tok.pad_token_id)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(
            create_app(engine, "tiny", tok), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(timeout=10)


class Recording:
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __call__(self, messages, tools=None):
        reply = self.inner(messages, tools)
        self.calls.append((messages, tools, reply))
        return reply


def test_reasoning_gym_through_an_endpoint(url):
    rec = Recording(EndpointResponder(url, "tiny", temperature=0.0, max_tokens=8))
    res = open_suite("reasoning_gym:chain_sum?n=2&seed=1").run(rec, baselines=False)
    assert len(res.items) == 2 and len(rec.calls) == 2
    assert all("error" not in i.detail for i in res.items)
    assert all(r["role"] == "assistant" and isinstance(r["content"], str) for *_, r in rec.calls)
    assert rec.calls[0][2]["usage"]["completion_tokens"] > 0


@pytest.mark.slow  # ~15 s: BFCL's prompts are long for the tiny model's tokenizer
@pytest.mark.skipif(
    not bfcl.DEFAULT_PYTHON.exists(), reason="bfcl-eval's virtualenv is missing: make setup-bfcl"
)
def test_bfcl_tools_reach_the_endpoint(url):
    rec = Recording(EndpointResponder(url, "tiny", temperature=0.0, max_tokens=8))
    res = open_suite("bfcl:simple_python?n=2&seed=1").run(rec, baselines=False)
    assert len(res.items) == 2 and len(rec.calls) == 2
    assert all(tools and tools[0]["type"] == "function" for _, tools, _ in rec.calls)
    assert not any(i.detail["result"].startswith("Error during inference") for i in res.items)
    assert Path(bfcl.find_python()).exists()
