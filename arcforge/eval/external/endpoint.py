"""A `Responder` backed by any OpenAI-compatible chat-completions endpoint (vLLM, SGLang,
`arcforge serve`, a hosted API): what `--endpoint URL` scores.

Tools go through as the request's `tools`; the server's parsed `tool_calls` come back as the
message's tool calls, and a server-side `reasoning_content` (vLLM/SGLang reasoning parsers) is
kept apart from the content. A failed request raises; the suites turn that into a failed item.
"""

from __future__ import annotations

import os
from typing import Any


class EndpointResponder:
    """`EndpointResponder("http://localhost:8000/v1", "my-model", temperature=0.0)`.

    Args:
        url: the server's OpenAI base URL (ending in `/v1` for most servers).
        model: the model name the server expects.
        api_key: defaults to `$OPENAI_API_KEY`, else a placeholder (local servers ignore it).
        timeout: seconds per request.
        **sampling: passed to `chat.completions.create` (temperature, top_p, max_tokens, seed,
            extra_body, ...).
    """

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        **sampling: Any,
    ):
        from openai import OpenAI

        self.url, self.model, self.sampling = url, model, sampling
        self.client = OpenAI(
            base_url=url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "unused",
            timeout=timeout,
            max_retries=2,
        )

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        kwargs = dict(self.sampling)
        if tools:
            kwargs["tools"] = tools
        resp = self.client.chat.completions.create(model=self.model, messages=messages, **kwargs)
        msg = resp.choices[0].message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in msg.tool_calls or []
        ]
        out = {
            "role": "assistant",
            "content": msg.content or "",
            "tool_calls": calls or None,
            "reasoning_content": getattr(msg, "reasoning_content", None),
        }
        if resp.usage is not None:
            out["usage"] = {
                "prompt_tokens": resp.usage.prompt_tokens,
                "completion_tokens": resp.usage.completion_tokens,
                "total_tokens": resp.usage.total_tokens,
            }
        return out
