"""`ServerEngine`: the `Engine` protocol over any OpenAI-compatible `/v1/completions` server that
takes prompt token ids and returns completion token ids and logprobs (vLLM, SGLang, `arcforge
serve`).

`completions_request` builds the request body and `parse_choice` reads one answer choice; the
vLLM engine (vllm.py) speaks the same schema.
"""

from __future__ import annotations

from typing import Any

import httpx
import torch

from arcforge.rollout.engines.base import Completion, SamplingParams


class ServerEngine:
    """Client for an OpenAI-compatible `POST {base_url}/v1/completions` (vLLM shape).

    Request fields: model, prompt (list of token-id lists), max_tokens, temperature, top_p,
    top_k (-1 = off), n, seed, stop_token_ids, logprobs=0, return_tokens_as_token_ids=true,
    skip_special_tokens=false. Response: choices[i] with index (= prompt * n + sample),
    finish_reason, logprobs.token_logprobs and logprobs.tokens ("token_id:<id>"); a
    choices[i].token_ids list, when present, is used for the ids instead.

    `load_weights` needs a server with `POST /update_weights {"path", "version"}` (arcforge
    serve has it) and a `weight_sync_dir` both processes can read.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        weight_sync_dir: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url, self.model, self.weight_sync_dir = (
            base_url.rstrip("/"),
            model,
            weight_sync_dir,
        )
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self._client.post(route, json=body)
        if r.status_code == 404 and route == "/update_weights":
            raise NotImplementedError(f"{self.base_url} has no /update_weights route")
        if r.status_code != 200:
            raise RuntimeError(f"{self.base_url}{route} answered {r.status_code}: {r.text[:500]}")
        return r.json()

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if params.tempered_logprobs:
            raise ValueError(
                f"{self.base_url}: tempered_logprobs needs the LocalEngine; a "
                "server returns raw logprobs (vLLM's default logprobs mode)"
            )
        if not prompts:
            return []
        body = completions_request(self.model, prompts, params)
        choices = sorted(self._post("/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompts) * params.n:
            raise RuntimeError(
                f"{self.base_url} returned {len(choices)} choices, "
                f"expected {len(prompts) * params.n}"
            )
        return [parse_choice(c) for c in choices]

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        if self.weight_sync_dir is None:
            raise NotImplementedError(
                "ServerEngine.load_weights needs weight_sync_dir and a server with "
                "POST /update_weights (arcforge serve); for vLLM/SGLang use their own weight "
                "update mechanism or restart the server on a new checkpoint"
            )
        from pathlib import Path

        from safetensors.torch import save_file

        path = Path(self.weight_sync_dir) / f"weights_v{version}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(path))
        self._post("/update_weights", {"path": str(path), "version": version})
        self._version = version


def completions_request(model: str, prompts: list[list[int]], params: SamplingParams) -> dict:
    """The `/v1/completions` body for token-id prompts that returns token ids and raw logprobs
    (vLLM's and `arcforge serve`'s extensions of the OpenAI schema)."""
    return {
        "model": model,
        "prompt": [list(map(int, p)) for p in prompts],
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
        "n": params.n,
        "seed": params.seed,
        "stop_token_ids": list(params.stop_token_ids),
        "logprobs": 0,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
    }


def parse_choice(c: dict[str, Any]) -> Completion:
    """One `/v1/completions` choice -> Completion: ids from `token_ids`, else from the
    "token_id:<id>" tokens; logprobs from `logprobs.token_logprobs`."""
    lp = c.get("logprobs") or {}
    ids = c.get("token_ids")
    if ids is None:
        tokens = lp.get("tokens") or []
        if any(not str(t).startswith("token_id:") for t in tokens):
            raise RuntimeError(
                "server did not return token ids: ask for "
                "return_tokens_as_token_ids (vLLM >= 0.6) or return token_ids"
            )
        ids = [int(str(t).split(":", 1)[1]) for t in tokens]
    logprobs = [float(x) for x in lp.get("token_logprobs") or []]
    if len(logprobs) != len(ids):
        raise RuntimeError(f"server returned {len(ids)} tokens but {len(logprobs)} logprobs")
    return Completion(
        list(ids), logprobs, "length" if c.get("finish_reason") == "length" else "stop"
    )
