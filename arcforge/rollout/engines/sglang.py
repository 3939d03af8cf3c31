"""SGLang as the rollout engine: its native `/generate` endpoint, token ids in and out.

`SGLangEngine` speaks the `Engine` protocol over HTTP to an SGLang server that it starts as a
subprocess (an interpreter with the `sglang` package) or that is already running (`url`). API
used, of SGLang 0.5.23 (PyPI `sglang` 0.5.23: `srt/entrypoints/http_server.py`, the request and
response schema `api/v1/api_types.py`, `srt/managers/io_struct.py`):

- server: `python -m sglang.launch_server --model-path DIR --skip-tokenizer-init --host H
  --port P` with `SGLANG_RETURN_ORIGINAL_LOGPROB=1`. No tokenizer is loaded: prompts are token
  ids and so are the outputs (TITO stays exact). `GET /health` answers 200 once it serves.
- generate: `POST /generate {"input_ids": [[...], ...], "sampling_params": {...},
  "return_logprob": true}`; the answer is a list, one object per input in input order, each
  `{"text", "output_ids", "meta_info": {"finish_reason": {"type": "stop"|"length"|"abort",
  ...}, "output_token_logprobs": [[logprob, token_id, text], ...], "weight_version", ...}}`.
  `text` is empty and the triples' text null without a tokenizer. `output_ids` keeps a matched
  stop token (SGLang trims it from the text only), so a stop token ends `token_ids` as in
  LocalEngine. The n samples of a prompt are sent as n rows so that each row can carry its own
  `sampling_seed` (seed + row, as LocalEngine); SGLang honours seeds only on a server started
  with `--enable-deterministic-inference`. `ignore_eos` makes `stop_token_ids` the only stops.
- logprobs: SGLang's sampler returns log_softmax(logits / T) by default and the raw
  log_softmax(logits) with `SGLANG_RETURN_ORIGINAL_LOGPROB=1`, which this engine sets on the
  server it starts: the convention of arcforge.rollout.engines.base. For a running server, say which
  one it returns (`logprobs="raw"|"tempered"`); a request whose convention differs at T != 1
  is refused rather than mislabelled. Greedy rows (T = 0) are raw either way.
- weights: `POST /pause_generation {"mode": "retract"}` (running requests go back to the
  queue and are recomputed after the update, so nothing is lost and no KV block computed with
  the old weights survives), `POST /update_weights_from_disk {"model_path": DIR,
  "weight_version": "<v>", "flush_cache": true}` (answers `{"success", "message",
  "num_paused_requests"}`, 400 on failure), `POST /continue_generation {}`. The checkpoint is
  written by `export_checkpoint` (server_process.py: an fp32 HF directory). GPU deployments
  colocated with the trainer would use `/update_weights_from_tensor` or
  `/update_weights_from_distributed` (NCCL) instead; through a shared disk is the path that
  needs no process group.

Each completion carries the weight version that sampled it: the server's `weight_version`
when it is one of ours (an integer), else the version of the last push; pushes and generate
calls are serialised by a lock. Tested here against a local stub serving responses in the
schema above (SGLang needs a GPU build); checked for real only where a GPU is lent.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.rollout.engines.server_process import REPO_ROOT, ServerProcess, export_checkpoint

DEFAULT_PYTHON = REPO_ROOT / ".venv-sglang" / "bin" / "python"
LogprobMode = Literal["raw", "tempered"]


def generate_request(prompts: list[list[int]], params: SamplingParams) -> dict[str, Any]:
    """The `/generate` body: one row per sample (prompt-major), raw token ids, logprobs on."""
    rows = [list(map(int, p)) for p in prompts for _ in range(params.n)]
    base = {
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "stop_token_ids": list(params.stop_token_ids),
        "ignore_eos": True,
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }
    sampling: dict[str, Any] | list[dict[str, Any]] = base
    if params.seed is not None:
        sampling = [{**base, "sampling_seed": params.seed + r} for r in range(len(rows))]
    return {
        "input_ids": rows,
        "sampling_params": sampling,
        "return_logprob": True,
        "logprob_start_len": -1,  # output tokens only: no prompt logprobs computed
    }


def parse_generate_response(out: dict[str, Any], version: int) -> Completion:
    """One `/generate` answer object -> Completion (ids and logprobs from the triples)."""
    meta = out.get("meta_info") or {}
    finish = meta.get("finish_reason") or {}
    if finish.get("type") == "abort":
        raise RuntimeError(f"SGLang aborted the request: {finish.get('message') or finish}")
    triples = meta.get("output_token_logprobs")
    if triples is None:
        raise RuntimeError("SGLang returned no meta_info.output_token_logprobs (return_logprob)")
    ids = [int(t[1]) for t in triples]
    if any(t[0] is None for t in triples):
        raise RuntimeError("SGLang returned an output token without a logprob")
    logprobs = [float(t[0]) for t in triples]
    if out.get("output_ids") is not None and list(out["output_ids"]) != ids:
        raise RuntimeError(
            f"SGLang's output_ids {out['output_ids']} differ from its logprob token ids {ids}"
        )
    served = meta.get("weight_version")
    if isinstance(served, str) and served.isdigit():
        version = int(served)
    reason = "length" if finish.get("type") == "length" else "stop"
    return Completion(ids, logprobs, reason, version=version)  # type: ignore[arg-type]


class SGLangEngine(ServerProcess):
    """The Engine protocol over SGLang's native HTTP API (see the module header).

    Args:
        model: the policy; its current weights are what a started server loads (copied to disk;
            the caller's model is not touched).
        url: a running SGLang server (holding `model`'s weights, able to read `workdir`) to
            use instead of starting one.
        workdir: where pushed checkpoints and the server log go (default: a temporary dir).
        python: interpreter with SGLang (see `ServerProcess.find_python`).
        max_model_len: the server's `--context-length` (default: the model's positions).
        startup_timeout: seconds to wait for the server's /health.
        extra_args: more `sglang.launch_server` arguments (e.g. `--dtype bfloat16`).
        request_timeout: seconds one HTTP request may take.
        logprobs: what the server returns: "raw" (a started server: the header) or "tempered".
    """

    server_name = "SGLang"
    python_env = "ARCFORGE_SGLANG_PYTHON"
    default_python = DEFAULT_PYTHON
    python_hint = (
        "install `sglang` (a GPU machine) into a "
        "virtualenv and set engine.python / ARCFORGE_SGLANG_PYTHON, or give engine.url"
    )

    def __init__(
        self,
        model: nn.Module,
        *,
        url: str | None = None,
        workdir: str | Path | None = None,
        python: str | None = None,
        max_model_len: int | None = None,
        startup_timeout: float = 900.0,
        extra_args: list[str] | tuple[str, ...] = (),
        request_timeout: float = 600.0,
        logprobs: LogprobMode = "raw",
    ) -> None:
        if logprobs not in ("raw", "tempered"):
            raise ValueError(f"logprobs must be 'raw' or 'tempered', got {logprobs!r}")
        python_path = self.find_python(python) if url is None else None  # fail before any work
        self.logprobs = logprobs
        self._open_workdir(model, workdir, "arcforge-sglang-")
        self._ckpt = None  # a running server holds its own weights until the first push
        self._connect(
            url,
            request_timeout,
            startup_timeout,
            lambda port: self._start(python_path, port, max_model_len, extra_args),  # type: ignore[arg-type]
        )

    # ------------------------------------------------------------ server lifecycle

    def _start(self, python: Path, port: int, max_len: int | None, extra) -> None:
        self._ckpt = export_checkpoint(
            self._model, self._model.state_dict(), self.workdir / "weights_v0"
        )
        max_len = max_len or int(self._model.config.max_position_embeddings)
        cmd = [
            str(python),
            "-m",
            "sglang.launch_server",
            "--model-path",
            str(self._ckpt),
            "--skip-tokenizer-init",
            "--context-length",
            str(max_len),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *extra,
        ]
        env = {**os.environ, "SGLANG_RETURN_ORIGINAL_LOGPROB": "1", "HF_HUB_OFFLINE": "1"}
        self._launch(cmd, env)

    def _post(self, route: str, body: dict[str, Any]) -> Any:
        r = self._client.post(route, json=body)
        if r.status_code != 200:
            raise RuntimeError(f"{self.url}{route} answered {r.status_code}: {r.text[:500]}")
        return r.json()

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if params.temperature not in (0.0, 1.0) and params.tempered_logprobs != (
            self.logprobs == "tempered"
        ):
            want = "tempered" if params.tempered_logprobs else "raw"
            raise ValueError(
                f"{self.url} returns {self.logprobs} logprobs but the sampler asks for {want} "
                f"ones at temperature {params.temperature}"
            )
        if not prompts:
            return []
        body = generate_request(prompts, params)
        with self._lock:
            outs = self._post("/generate", body)
            version = self._version
        if isinstance(outs, dict):  # a single object: one row
            outs = [outs]
        if len(outs) != len(prompts) * params.n:
            raise RuntimeError(
                f"{self.url} returned {len(outs)} outputs, expected {len(prompts) * params.n}"
            )
        return [parse_generate_response(o, version) for o in outs]

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Push `state_dict` (HF names) as `version`: written to disk, then loaded in place by
        the server between a pause and a continue (see the module header)."""

        def reload(new: Path) -> None:
            self._post("/pause_generation", {"mode": "retract"})
            try:
                body = {"model_path": str(new), "weight_version": str(version), "flush_cache": True}
                out = self._post("/update_weights_from_disk", body)
                if not out.get("success", False):
                    raise RuntimeError(f"{self.url} did not load {new}: {out.get('message')}")
            finally:
                self._post("/continue_generation", {})

        self._push_checkpoint(state_dict, version, reload)
