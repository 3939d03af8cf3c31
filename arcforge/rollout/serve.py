"""`arcforge serve`: a LocalEngine behind the OpenAI-compatible completions API (vLLM's shape).

Routes:
    POST /v1/completions   prompt: token ids (list[int] | list[list[int]]) or, with a
                           tokenizer, text (str | list[str]); max_tokens, temperature, top_p,
                           top_k (<= 0 off), n, seed, stop_token_ids, logprobs,
                           return_tokens_as_token_ids. Unknown fields are ignored, as in vLLM.
                           choices[i]: index (= prompt * n + sample), text, token_ids (always),
                           logprobs {tokens, token_logprobs, top_logprobs, text_offset} when
                           `logprobs` is set, finish_reason ("stop" | "length").
    POST /v1/chat/completions  messages (OpenAI shape; tool results as role "tool"), tools
                           (OpenAI function schemas), max_tokens, temperature, top_p, n, seed,
                           chat_template_kwargs {"enable_thinking": bool} (vLLM's switch),
                           stream (server-sent chunks), stream_options {"include_usage"}.
                           Rendered with arcforge's chat template (needs a tokenizer) and
                           stopped at <|end|>; each reply is parsed back into content,
                           reasoning_content and OpenAI `tool_calls` (see chat_serve.py).
    GET  /v1/models        the one served model.
    GET  /health           {"status": "ok", "version": <policy version>}.
    POST /update_weights   {"path": <safetensors file>, "version": int}: the weight-sync route
                           ServerEngine.load_weights uses.

Requests are served one at a time (a lock around the engine): batching happens inside a
request. That is the simplification against vLLM's continuous batching.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from arcforge.rollout.chat_serve import SamplingRequest, add_chat_route
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine


class CompletionRequest(SamplingRequest):
    prompt: list[int] | list[list[int]] | str | list[str]
    max_tokens: int = 16
    stop_token_ids: list[int] | None = None
    logprobs: int | None = None
    return_tokens_as_token_ids: bool = False


class UpdateWeightsRequest(BaseModel):
    path: str
    version: int


def _prompt_ids(prompt: Any, tokenizer: Any) -> list[list[int]]:
    if isinstance(prompt, str):
        prompt = [prompt]
    if prompt and isinstance(prompt[0], int):
        return [list(prompt)]
    if prompt and isinstance(prompt[0], str):
        if tokenizer is None:
            raise HTTPException(400, "text prompts need a tokenizer; send token ids instead")
        return [tokenizer.encode(p, add_special_tokens=False) for p in prompt]
    return [list(p) for p in prompt]


def _choice(i: int, c, req: CompletionRequest, tokenizer: Any) -> dict[str, Any]:
    text = tokenizer.decode(c.token_ids) if tokenizer is not None else ""
    out: dict[str, Any] = {
        "index": i,
        "text": text,
        "token_ids": c.token_ids,
        "finish_reason": c.finish_reason,
        "logprobs": None,
    }
    if req.logprobs is not None:
        if req.return_tokens_as_token_ids or tokenizer is None:
            tokens = [f"token_id:{t}" for t in c.token_ids]
        else:
            tokens = tokenizer.convert_ids_to_tokens(c.token_ids)
        out["logprobs"] = {
            "tokens": tokens,
            "token_logprobs": c.logprobs,
            "top_logprobs": None,
            "text_offset": [],
        }
    return out


def create_app(engine: LocalEngine, model_name: str, tokenizer: Any = None) -> FastAPI:
    """The completions API over `engine`. `tokenizer` (optional) enables text prompts."""
    app = FastAPI(title="arcforge serve")
    lock = threading.Lock()

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": engine.version}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        card = {
            "id": model_name,
            "object": "model",
            "owned_by": "arcforge",
            "version": engine.version,
        }
        return {"object": "list", "data": [card]}

    @app.post("/v1/completions")
    def completions(req: CompletionRequest) -> dict[str, Any]:
        prompts = _prompt_ids(req.prompt, tokenizer)
        try:
            params = SamplingParams(
                max_new_tokens=req.max_tokens,
                temperature=req.temperature,
                top_p=req.top_p,
                top_k=max(req.top_k, 0),
                stop_token_ids=tuple(req.stop_token_ids or ()),
                seed=req.seed,
                n=req.n,
            )
            with lock:
                comps = engine.generate(prompts, params)
        except ValueError as e:
            raise HTTPException(400, str(e)) from e
        n_prompt = sum(len(p) for p in prompts) * req.n
        n_new = sum(len(c.token_ids) for c in comps)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [_choice(i, c, req, tokenizer) for i, c in enumerate(comps)],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_new,
                "total_tokens": n_prompt + n_new,
            },
        }

    @app.post("/update_weights")
    def update_weights(req: UpdateWeightsRequest) -> dict[str, Any]:
        from safetensors.torch import load_file

        if not Path(req.path).is_file():
            raise HTTPException(400, f"no weights file at {req.path}")
        with lock:
            engine.load_weights(load_file(req.path), req.version)
        return {"status": "ok", "version": engine.version}

    add_chat_route(app, engine, model_name, tokenizer, lock)
    return app


def serve(
    checkpoint_dir: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    precision: str = "fp32",
    model_name: str | None = None,
) -> None:
    """Load a Hugging Face checkpoint directory and serve it with uvicorn (blocks)."""
    import uvicorn
    from transformers import AutoTokenizer

    from arcforge.model.checkpoint import load_model

    if not Path(checkpoint_dir).is_dir():
        raise FileNotFoundError(f"checkpoint directory not found: {checkpoint_dir}")
    model = load_model(checkpoint_dir)  # on the run device (`arcforge serve --device`)
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    except (OSError, ValueError):
        tokenizer = None
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    engine = LocalEngine(model, pad_token_id=pad, precision=precision)
    app = create_app(engine, model_name or Path(checkpoint_dir).name, tokenizer)
    uvicorn.run(app, host=host, port=port, log_level="info")
