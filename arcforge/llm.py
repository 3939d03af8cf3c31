"""A small client for any OpenAI-compatible chat endpoint, used by every LLM-driven synth step.

`LLMClient(base_url, model)` wraps the official `openai` client pointed at `{base_url}/v1`. The
API key is read from the environment variable named by `api_key_env`, never from a config file;
without one the placeholder key "EMPTY" is sent (what vLLM and `arcforge serve` accept). The
`openai` client retries connection errors, timeouts, 408/409/429 and 5xx with its own
exponential backoff (honouring Retry-After); any other HTTP error is a mistake in the request
and fails at once. Every failure is an `LLMError` naming the endpoint, so the CLI prints one
line.

`chat_json` asks for JSON and parses the reply with `parse_json_loose`, which tolerates what
small and chatty models actually write: <think> blocks, ``` fences, prose around the object,
trailing commas, single-quoted strings and Python literals (True/False/None). When a reply
still does not parse, the model is asked again with the parse error appended (a repair turn).
`ask_json` is that loop for any client: it keeps an unparsable reply (`UnparsableReply`, a
ValueError) apart from an endpoint failure (LLMError), as synthesis needs.

Simplification: `n` samples are requested in one call; a server that returns fewer choices is
asked again (seed + k) until n texts are collected.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import openai

from arcforge.errors import UserError

NO_KEY = "EMPTY"
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.DOTALL)
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}


class LLMError(UserError):
    """An LLM endpoint failed or kept answering something unusable; names the endpoint."""


def clip(text: str, n: int = 200) -> str:
    """`text` on one line, cut to n characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= n else flat[: n - 3] + "..."


class LLMClient:
    """Chat completions against an OpenAI-compatible server (vLLM, SGLang, `arcforge serve`).

    Args:
        base_url: server root, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted).
        model: the model name sent with every request.
        api_key_env: environment variable holding the API key (None or unset: no real key).
        timeout: seconds per HTTP request.
        max_retries: retries after the first attempt on connection errors, timeouts, 408,
            409, 429 and 5xx (the `openai` client's policy and backoff).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"LLM base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model, self.timeout, self.max_retries = model, timeout, max_retries
        key = os.environ.get(api_key_env) if api_key_env else None
        self.endpoint = f"{self.base_url}/v1/chat/completions"
        self.client = openai.OpenAI(
            base_url=f"{self.base_url}/v1",
            api_key=key or NO_KEY,
            timeout=timeout,
            max_retries=max_retries,
        )

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion for `body` (the request's JSON fields): the response as a dict,
        server-specific fields (reasoning_content, ...) included."""
        try:
            return self.client.chat.completions.create(**body).model_dump()
        except openai.APIStatusError as err:
            last = f"HTTP {err.status_code}: {clip(err.response.text)}"
            if err.status_code in (408, 409, 429) or err.status_code >= 500:
                raise LLMError(self._gave_up(last)) from None
            raise LLMError(f"{self.endpoint} refused the request ({last})") from None
        except openai.APIConnectionError as err:
            cause = err.__cause__
            last = f"{type(cause).__name__}: {cause}" if cause else str(err)
            raise LLMError(self._gave_up(last)) from None
        except openai.APIResponseValidationError as err:
            raise LLMError(f"{self.endpoint} answered an unreadable response: {err}") from None

    def _gave_up(self, last: str) -> str:
        return f"{self.endpoint} failed after {self.max_retries + 1} attempts ({last})"

    def chat(
        self,
        messages: list[dict],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        n: int = 1,
        seed: int | None = None,
    ) -> list[str]:
        """Sample `n` replies to `messages` (OpenAI message dicts).

        Returns:
            n reply texts (the `content` of each choice; "" when a choice had none).
        Raises:
            LLMError: the endpoint failed, or answered without choices.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        texts: list[str] = []
        while len(texts) < n:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "n": n - len(texts),
            }
            if seed is not None:
                body["seed"] = seed + len(texts)
            choices = self._post(body).get("choices")
            if not isinstance(choices, list) or not choices:
                raise LLMError(f"{self.endpoint} answered without choices")
            for c in choices[: n - len(texts)]:
                msg = c.get("message") if isinstance(c, dict) else None
                if not isinstance(msg, dict):
                    raise LLMError(f"{self.endpoint} answered a choice without a message: {c!r}")
                texts.append(msg.get("content") or "")
        return texts

    def chat_json(self, messages: list[dict], *, retries: int = 2, **kw: Any) -> Any:
        """Ask for JSON and parse it loosely; re-ask with the parse error up to `retries` times.

        Args:
            messages: the conversation; it should ask for JSON.
            retries: repair turns after the first reply.
            **kw: passed to `chat` (temperature, max_tokens, seed); n is always 1.
        Raises:
            LLMError: naming the endpoint and a clip of the last reply, when none parsed.
        """
        try:
            return ask_json(self, messages, repairs=retries, **kw)
        except UnparsableReply as err:
            raise LLMError(f"{self.endpoint} gave {err}") from None


class UnparsableReply(ValueError):
    """A model kept answering something `parse_json_loose` cannot read (its repairs spent)."""


def ask_json(client: Any, messages: list[dict], repairs: int = 1, **kw: Any) -> Any:
    """The parsed JSON reply to `messages` from `client.chat`, telling a model's mistake from an
    endpoint failure: an endpoint failure stays what `client.chat` raises (an LLMError after its
    retries), and a reply that still does not parse after `repairs` repair turns (the parse
    error appended to the conversation) is an `UnparsableReply` naming a clip of it. Synthesis
    drops one record for the latter and stops the run for the former.

    Args:
        client: anything with `chat(messages, n=..., **kw) -> list[str]` (an LLMClient).
        messages: the conversation; it should ask for JSON.
        repairs: repair turns after the first reply.
        **kw: passed to `chat` (temperature, max_tokens, seed); n is always 1.
    """
    convo = list(messages)
    text, err = "", ""
    for _ in range(repairs + 1):
        text = client.chat(convo, **{**kw, "n": 1})[0]
        try:
            return parse_json_loose(text)
        except ValueError as e:
            err = str(e)
        convo = [
            *convo,
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"Your reply could not be parsed as JSON ({err})."
                " Reply again with only the JSON value, no prose.",
            },
        ]
    raise UnparsableReply(
        f"no parsable JSON after {repairs + 1} tries ({err}); last reply: {clip(text)}"
    )


def _balanced(text: str) -> str:
    """The first balanced {...} or [...] in `text`, string-aware (both quote kinds)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("no JSON object or array in the text")
    start = min(starts)
    stack: list[str] = []
    quote = ""
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                raise ValueError(f"mismatched {ch!r} at offset {i}")
            if not stack:
                return text[start : i + 1]
        i += 1
    raise ValueError("unbalanced JSON: the text ends before the object/array closes")


def _repair(src: str) -> str:
    """Rewrite single-quoted strings, Python literals and trailing commas into JSON."""
    out: list[str] = []
    i = 0
    while i < len(src):
        ch = src[i]
        if ch in "\"'":
            j, buf = i + 1, []
            while j < len(src) and src[j] != ch:
                if src[j] == "\\" and j + 1 < len(src):
                    nxt = src[j + 1]
                    buf.append(nxt if nxt in "'\"" else "\\" + nxt)
                    j += 2
                    continue
                buf.append(src[j])
                j += 1
            body = "".join(buf)
            # re-encode: decode JSON escapes the body already had, then dump as one JSON string
            try:
                value = json.loads('"' + body.replace('"', '\\"') + '"')
            except json.JSONDecodeError:
                value = body
            out.append(json.dumps(value, ensure_ascii=False))
            i = j + 1
        elif ch == ",":
            k = i + 1
            while k < len(src) and src[k].isspace():
                k += 1
            if k < len(src) and src[k] in "}]":
                i += 1  # trailing comma
                continue
            out.append(ch)
            i += 1
        elif ch.isalpha() or ch == "_":
            m = re.match(r"[A-Za-z_]\w*", src[i:])
            word = m.group(0) if m else ch
            out.append(_PY_WORDS.get(word, word))
            i += len(word)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_json_loose(text: str) -> Any:
    """Parse the JSON value an LLM meant to write.

    Steps: drop <think>...</think> blocks (and everything before a lone </think>); prefer the
    body of the first ``` fence; take the first balanced {...} or [...]; try strict JSON, then a
    repaired version (single quotes -> double, True/False/None -> true/false/null, trailing
    commas removed).

    Raises:
        ValueError: naming what was wrong (no object, unbalanced, or invalid after repair).
    """
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    t = _THINK.sub("", text)
    if "</think>" in t:
        t = t.rsplit("</think>", 1)[1]
    fences = [f for f in _FENCE.findall(t) if f.strip()[:1] in ("{", "[")]
    if fences:
        t = fences[0]
    snippet = _balanced(t)
    try:
        return json.loads(snippet)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_repair(snippet))
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON even after repair: {err.msg} at offset {err.pos}") from None
