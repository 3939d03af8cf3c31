"""`/v1/chat/completions` for `arcforge serve`: OpenAI chat messages in, parsed replies out.

The request's messages (OpenAI shape: content strings or text parts, assistant `tool_calls`
with JSON-string arguments, `reasoning_content`, role "tool" results) become arcforge
`Message`s, are rendered with our chat template (tools from the request's OpenAI function
schemas go into the system block) with the generation prompt, and sampled until <|end|>. Each
reply is decoded with special tokens kept and parsed by `parse_assistant` into `content`,
`reasoning_content` and OpenAI `tool_calls` (arguments as a JSON string), so any OpenAI client,
including `arcforge.llm.LLMClient`, can drive a local checkpoint. Thinking follows vLLM's
`chat_template_kwargs.enable_thinking` (default on, as the template's default). `max_tokens`
is cut to the room left in the model's context (OpenAI's behaviour for an over-long request).
`stream: true` answers with server-sent `chat.completion.chunk` events in OpenAI's streaming
shape (tool calls as `delta.tool_calls`, `stream_options.include_usage` adds a usage chunk),
so streaming clients work unchanged.

Simplification: a streamed reply is generated whole before its first event is sent (the
engine has no per-token callback), so streaming changes the wire format, not the latency.

A malformed tool call in a reply is dropped from `tool_calls` (the parse errors are returned in
a non-standard `arcforge_errors` field of the message, or of the finish chunk's delta when
streaming) rather than failing the request.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict

from arcforge.chat import ThinkingConfig, parse_assistant, render_ids
from arcforge.chat.formats import ChatFormat, NativeFormat, chat_format
from arcforge.rollout.engines.base import SamplingParams
from arcforge.types import Message, Tool


class SamplingRequest(BaseModel):
    """The OpenAI sampling fields both endpoints take; unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    n: int = 1
    seed: int | None = None


class ChatRequest(SamplingRequest):
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_tokens: int = 256
    chat_template_kwargs: dict[str, Any] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None


def _content_text(content: Any) -> str:
    """OpenAI content: a string, None, or a list of {"type": "text", "text": ...} parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise ValueError(f"content must be a string or a list of text parts, got {type(content)}")


def to_messages(raw: list[dict[str, Any]]) -> list[Message]:
    """OpenAI chat messages -> arcforge Messages; ValueError names the bad message."""
    out = []
    for i, m in enumerate(raw):
        try:
            out.append(Message.from_dict({**m, "content": _content_text(m.get("content"))}))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"messages[{i}]: {err}") from None
    return out


def to_tools(raw: list[dict[str, Any]] | None) -> list[Tool] | None:
    """OpenAI function-tool schemas -> Tools without callables (for rendering only)."""
    if not raw:
        return None
    tools = []
    for i, t in enumerate(raw):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError(f'tools[{i}]: expected {{"type": "function", "function": {{"name"...')
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        tools.append(Tool(fn["name"], fn.get("description", ""), params))
    return tools


def reply_message(
    text: str, k: int, fmt: ChatFormat | None = None, tools: list[Tool] | None = None
) -> tuple[dict[str, Any], bool]:
    """One decoded reply -> (OpenAI assistant message, has tool calls); parsed in `fmt`'s
    dialect (arcforge's format when None)."""
    parsed = parse_assistant(text) if fmt is None else fmt.parse(text, tools)
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        msg["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        msg["tool_calls"] = [
            {
                "id": f"call_{k}_{j}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for j, c in enumerate(parsed.tool_calls)
        ]
    if parsed.errors:
        msg["arcforge_errors"] = parsed.errors
    return msg, bool(parsed.tool_calls)


def context_length(engine: Any) -> int | None:
    """The served model's max_position_embeddings, when the engine exposes its model."""
    cfg = getattr(getattr(engine, "_master", None), "config", None)
    return getattr(cfg, "max_position_embeddings", None)


def chunk(base: dict[str, Any], index: int, delta: dict[str, Any], finish: str | None = None):
    """One `chat.completion.chunk` server-sent event for choice `index`."""
    body = {**base, "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


def stream_events(base: dict[str, Any], replies: list[tuple[dict[str, Any], str]], usage=None):
    """The SSE events of finished replies, OpenAI's streaming shape: per choice a role chunk,
    then reasoning_content, content and each tool call (index, id, name, whole arguments),
    then the finish chunk; a usage chunk (empty choices) when asked for; then [DONE]."""
    base = {**base, "object": "chat.completion.chunk"}
    for k, (msg, finish) in enumerate(replies):
        yield chunk(base, k, {"role": "assistant", "content": ""})
        if msg.get("reasoning_content") is not None:
            yield chunk(base, k, {"reasoning_content": msg["reasoning_content"]})
        if msg["content"]:
            yield chunk(base, k, {"content": msg["content"]})
        for j, call in enumerate(msg.get("tool_calls", [])):
            yield chunk(base, k, {"tool_calls": [{"index": j, **call}]})
        extra = {"arcforge_errors": msg["arcforge_errors"]} if "arcforge_errors" in msg else {}
        yield chunk(base, k, extra, finish)
    if usage is not None:
        yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def add_chat_route(
    app: FastAPI, engine: Any, model_name: str, tokenizer: Any, lock: threading.Lock
) -> None:
    """Register POST /v1/chat/completions on `app` (shares the engine lock)."""

    @app.post("/v1/chat/completions", response_model=None)
    def chat_completions(req: ChatRequest) -> dict[str, Any] | StreamingResponse:
        if tokenizer is None:
            raise HTTPException(400, "chat completions need the checkpoint's tokenizer")
        try:
            prompt, comps = _generate(req, engine, tokenizer, lock)
            fmt, tools = chat_format(tokenizer), to_tools(req.tools)
        except ValueError as err:
            raise HTTPException(400, str(err)) from err
        replies = []
        for k, c in enumerate(comps):
            text = tokenizer.decode(c.token_ids, skip_special_tokens=False)
            msg, calls = reply_message(text, k, fmt, tools)
            replies.append((msg, "tool_calls" if calls else c.finish_reason))
        n_new = sum(len(c.token_ids) for c in comps)
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": n_new,
            "total_tokens": len(prompt) + n_new,
        }
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
            "model": model_name,
        }
        if req.stream:
            with_usage = bool((req.stream_options or {}).get("include_usage"))
            events = stream_events(base, replies, usage if with_usage else None)
            return StreamingResponse(events, media_type="text/event-stream")
        choices = [
            {"index": k, "message": msg, "finish_reason": finish}
            for k, (msg, finish) in enumerate(replies)
        ]
        return {**base, "object": "chat.completion", "choices": choices, "usage": usage}


def _generate(req: ChatRequest, engine: Any, tokenizer: Any, lock: threading.Lock):
    """Render the request with the generation prompt and sample: (prompt ids, completions).

    Raises:
        ValueError: naming the bad message or tool, or a prompt that fills the context.
    """
    messages, tools = to_messages(req.messages), to_tools(req.tools)
    fmt = chat_format(tokenizer)
    if isinstance(fmt, NativeFormat):
        kwargs = {**fmt.template_kwargs, **(req.chat_template_kwargs or {})}
        prompt = replace(fmt, template_kwargs=kwargs).prompt_ids(messages, tools)
    else:
        think = bool((req.chat_template_kwargs or {}).get("enable_thinking", True))
        prompt = render_ids(
            messages, tokenizer, tools, ThinkingConfig(enabled=think), add_generation_prompt=True
        ).input_ids
    room = (context_length(engine) or 1 << 30) - len(prompt)
    if room < 1:
        raise ValueError(f"the rendered prompt ({len(prompt)} tokens) fills the context")
    stops = tuple(fmt.stop_ids())
    params = SamplingParams(
        max_new_tokens=min(req.max_tokens, room),
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=max(req.top_k, 0),
        stop_token_ids=stops,
        seed=req.seed,
        n=req.n,
    )
    with lock:
        return prompt, engine.generate([prompt], params)
