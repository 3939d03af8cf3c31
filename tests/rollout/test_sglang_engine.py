"""SGLangEngine against a local HTTP stub that stands in for an SGLang server.

SGLang cannot run on this CPU machine (its server needs a GPU build), so the stub below serves
its native routes with bodies in SGLang 0.5.23's own shapes, taken from that release's source
(PyPI `sglang` 0.5.23): `/generate` answers as `api/v1/api_types.py` GenerateResponse /
GenerateMetaInfo encode them (a list, one object per input row, `output_token_logprobs` as
`[logprob, token_id, text]` triples with null text under `--skip-tokenizer-init`, finish
reasons `{"type": "stop", "matched": id}` / `{"type": "length", "length": n}`), and the weight
routes answer as `srt/entrypoints/http_server.py` does (`/update_weights_from_disk`:
`{"success", "message", "num_paused_requests"}`, 400 on failure; `/pause_generation` and
`/continue_generation`: `{"message", "status": "ok"}`). `RECORDED` is one such answer kept
verbatim. The stub's token rule is its own (next ids counting up from the prompt's last id);
what is tested is the client: request bodies, ordering, parsing, stop tokens, version tags and
the weight-push sequence. A GPU check runs the engine against a real server when one is lent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.factory import make_engine
from arcforge.rollout.engines.sglang import SGLangEngine, parse_generate_response

V = 64

# One /generate answer object in SGLang 0.5.23's encoding (GenerateResponse), for a row whose
# sampling stopped on stop token 7; no tokenizer on the server, so text is empty.
RECORDED = {
    "text": "",
    "output_ids": [12, 7],
    "meta_info": {
        "id": "8f1c2a0e5b6d4c3f9a7e1d2b3c4f5a6b",
        "finish_reason": {"type": "stop", "matched": 7},
        "prompt_tokens": 3,
        "weight_version": "default",
        "total_retractions": 0,
        "completion_tokens": 2,
        "cached_tokens": 0,
        "e2e_latency": 0.0213,
        "output_token_logprobs": [[-1.3862943, 12, None], [-0.2876821, 7, None]],
    },
}


class _Stub:
    """The SGLang routes the engine uses, with a request log and a weight version."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.version = "default"
        self.loaded: dict[str, torch.Tensor] = {}
        self.fail_update = False

    def generate(self, body: dict) -> list[dict]:
        rows, sp = body["input_ids"], body["sampling_params"]
        out = []
        for r, ids in enumerate(rows):
            p = sp[r] if isinstance(sp, list) else sp
            toks, finish = [], {"type": "length", "length": p["max_new_tokens"]}
            for k in range(p["max_new_tokens"]):
                toks.append((ids[-1] + k + 1) % V)
                if toks[-1] in p["stop_token_ids"]:
                    finish = {"type": "stop", "matched": toks[-1]}
                    break
            lps = [[-0.1 * (k + 1), t, None] for k, t in enumerate(toks)]
            meta = {
                "id": f"rid{r}",
                "finish_reason": finish,
                "prompt_tokens": len(ids),
                "weight_version": self.version,
                "completion_tokens": len(toks),
                "cached_tokens": 0,
                "e2e_latency": 0.01,
                "output_token_logprobs": lps,
            }
            out.append({"text": "", "output_ids": toks, "meta_info": meta})
        return out

    def handle(self, route: str, body: dict) -> tuple[int, object]:
        self.calls.append((route, body))
        if route == "/generate":
            return 200, self.generate(body)
        if route == "/pause_generation":
            return 200, {"message": "Generation paused successfully.", "status": "ok"}
        if route == "/continue_generation":
            return 200, {"message": "Generation continued successfully.", "status": "ok"}
        if route == "/update_weights_from_disk":
            if self.fail_update:
                msg = "Failed to get weights iterator: shape mismatch."
                return 400, {"success": False, "message": msg, "num_paused_requests": 0}
            self.loaded = load_file(str(Path(body["model_path"]) / "model.safetensors"))
            self.version = body["weight_version"]
            msg = f"Succeeded to update model weights. Weight version updated to {self.version}."
            return 200, {"success": True, "message": msg, "num_paused_requests": 0}
        return 404, {"detail": "Not Found"}


@pytest.fixture
def server():
    stub = _Stub()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, obj: object) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200 if self.path == "/health" else 404, {})

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            self._send(*stub.handle(self.path, json.loads(self.rfile.read(n) or b"{}")))

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stub.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield stub
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def model():
    return init_model(build_config("nano", V, 128), seed=0)


def test_recorded_answer_parses_to_ids_logprobs_and_stop():
    c = parse_generate_response(RECORDED, version=3)
    assert c.token_ids == [12, 7] and c.finish_reason == "stop"  # the stop token ends the ids
    torch.testing.assert_close(c.logprobs, [-1.3862943, -0.2876821])
    assert c.version == 3  # "default" is not one of ours: the engine's own version


def test_generate_sends_token_rows_and_reads_them_back_in_order(server, model, tmp_path):
    eng = SGLangEngine(model, url=server.url, workdir=tmp_path)
    params = SamplingParams(max_new_tokens=4, temperature=0.7, stop_token_ids=(12,), n=2, seed=5)
    out = eng.generate([[1, 2, 9], [30]], params)
    route, body = server.calls[-1]
    assert route == "/generate" and body["return_logprob"] is True
    assert body["input_ids"] == [[1, 2, 9], [1, 2, 9], [30], [30]]  # prompt-major rows
    sp = body["sampling_params"]
    assert [p["sampling_seed"] for p in sp] == [5, 6, 7, 8]  # seed + row, as LocalEngine
    assert sp[0]["top_k"] == -1 and sp[0]["ignore_eos"] and sp[0]["stop_token_ids"] == [12]
    # prompt [1,2,9] counts up 10, 11, 12: the stop token 12 ends it; [30] runs to the length
    stopped, full = [10, 11, 12], [31, 32, 33, 34]
    assert [c.token_ids for c in out] == [stopped, stopped, full, full]
    assert [c.finish_reason for c in out] == ["stop", "stop", "length", "length"]
    torch.testing.assert_close(out[2].logprobs, [-0.1, -0.2, -0.3, -0.4])
    assert all(c.version == 0 for c in out)
    unseeded = SamplingParams(max_new_tokens=2)
    eng.generate([[5]], unseeded)
    assert isinstance(server.calls[-1][1]["sampling_params"], dict)  # one dict for every row


def test_weight_push_pauses_loads_the_checkpoint_and_tags_new_segments(server, model, tmp_path):
    eng = SGLangEngine(model, url=server.url, workdir=tmp_path)
    sd = {k: v + 0.5 for k, v in model.state_dict().items()}
    eng.load_weights(sd, version=1)
    routes = [r for r, _ in server.calls]
    assert routes == ["/pause_generation", "/update_weights_from_disk", "/continue_generation"]
    update = server.calls[1][1]
    assert update["weight_version"] == "1" and update["flush_cache"] is True
    assert server.calls[0][1] == {"mode": "retract"}
    for k, v in sd.items():  # the server read exactly the pushed weights
        torch.testing.assert_close(server.loaded[k], v)
    assert eng.version == 1 and len(eng.push_seconds) == 1
    (c,) = eng.generate([[3]], SamplingParams(max_new_tokens=2))
    assert c.version == 1  # the server's weight_version "1" tags the new segment


def test_failed_push_resumes_generation_and_keeps_the_old_version(server, model, tmp_path):
    eng = SGLangEngine(model, url=server.url, workdir=tmp_path)
    server.fail_update = True
    with pytest.raises(RuntimeError, match="400"):
        eng.load_weights(model.state_dict(), version=4)
    assert [r for r, _ in server.calls][-1] == "/continue_generation"
    assert eng.version == 0


def test_logprob_convention_is_checked_and_aborts_raise(server, model, tmp_path):
    eng = SGLangEngine(model, url=server.url, workdir=tmp_path)  # a raw-logprob server
    with pytest.raises(ValueError, match="raw logprobs"):
        eng.generate([[1]], SamplingParams(temperature=0.7, tempered_logprobs=True))
    eng.generate([[1]], SamplingParams(temperature=0.0, tempered_logprobs=True))  # greedy: same
    aborted = {"text": "", "meta_info": {"finish_reason": {"type": "abort", "message": "oom"}}}
    with pytest.raises(RuntimeError, match="aborted"):
        parse_generate_response(aborted, 0)


def test_make_engine_builds_the_sglang_client(server, model, tmp_path):
    from arcforge.config import EngineCfg

    cfg = EngineCfg(kind="sglang", url=server.url, workdir=str(tmp_path))
    eng = make_engine(cfg, model, pad_token_id=0)
    assert isinstance(eng, SGLangEngine) and eng.url == server.url
