"""Model output -> reasoning, content and tool calls, never raising on bad output.

A sampled reply looks like `<think>\\n{reasoning}\\n</think>\\n{content}<tool_call>{json}
</tool_call>...<|end|>` (the template's assistant shape). Everything the model can get wrong (bad
JSON, a call without "name", non-object "arguments", a tag left open) becomes a message in
`ParsedAssistant.errors` that names the call and the problem, so the agent loop can hand it
back to the model as an error observation. Servers that return OpenAI `tool_calls` are read by
`parse_openai_message`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from arcforge.chat.tokens import CALL_CLOSE, CALL_OPEN, END, EOS, THINK_CLOSE, THINK_OPEN
from arcforge.types import Message, ToolCall

_CALL_SHAPE = '{"name": "<tool name>", "arguments": {...}}'
_JSON_NAMES = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


@dataclass
class ParsedAssistant:
    """A parsed reply. reasoning is None when the reply had no think block."""

    reasoning: str | None
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def json_type_name(value: Any) -> str:
    """The JSON name of a Python value's type (object, array, string, ...)."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _clip(text: str, n: int = 80) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 3] + "..."


def _strip_one(text: str, head: bool = True, tail: bool = True) -> str:
    """Remove one leading and/or one trailing newline (the template's own separators)."""
    if head and text.startswith("\n"):
        text = text[1:]
    if tail and text.endswith("\n"):
        text = text[:-1]
    return text


def split_thinking(text: str) -> tuple[str | None, str, list[str]]:
    """Split a reply into (reasoning, rest, errors).

    A reply that opens with <think> must close it; a reply holding only </think> is taken to
    continue a think block the prompt opened.
    """
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN) :]
        close = body.find(THINK_CLOSE)
        if close < 0:
            err = f"unclosed {THINK_OPEN}: the reply ended before {THINK_CLOSE}"
            return _strip_one(body), "", [err]
        rest = body[close + len(THINK_CLOSE) :]
        return _strip_one(body[:close]), _strip_one(rest, tail=False), []
    close = text.find(THINK_CLOSE)
    if close >= 0 and THINK_OPEN not in text[:close]:
        rest = text[close + len(THINK_CLOSE) :]
        return _strip_one(text[:close]), _strip_one(rest, tail=False), []
    return None, text, []


def parse_call_json(body: str, n: int) -> ToolCall | str:
    """Parse the JSON between <tool_call> tags; an error message names call number `n`."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return f"tool call {n}: invalid JSON ({e.msg} at column {e.colno}): {_clip(body)}"
    if not isinstance(obj, dict):
        return f"tool call {n}: expected a JSON object {_CALL_SHAPE}, got {json_type_name(obj)}"
    name = obj.get("name")
    if name is None:
        return f'tool call {n}: missing "name"; expected {_CALL_SHAPE}'
    if not isinstance(name, str) or not name.strip():
        return f'tool call {n}: "name" must be a non-empty string, got {json.dumps(name)}'
    args = obj.get("arguments", {})
    if not isinstance(args, dict):
        got = json_type_name(args)
        return f'tool call {n} ({name}): "arguments" must be a JSON object, got {got}'
    return ToolCall(name=name, arguments=args)


def _scan_calls(rest: str) -> tuple[str, list[ToolCall], list[str]]:
    """Pull every <tool_call>...</tool_call> out of `rest`: (content, calls, errors)."""
    pieces: list[str] = []
    calls: list[ToolCall] = []
    errors: list[str] = []
    pos, n = 0, 0
    while True:
        start = rest.find(CALL_OPEN, pos)
        if start < 0:
            pieces.append(rest[pos:])
            break
        pieces.append(rest[pos:start])
        n += 1
        end = rest.find(CALL_CLOSE, start)
        if end < 0:
            body = rest[start + len(CALL_OPEN) :]
            errors.append(f"tool call {n}: unclosed {CALL_OPEN} (no {CALL_CLOSE}): {_clip(body)}")
            break
        result = parse_call_json(rest[start + len(CALL_OPEN) : end], n)
        if isinstance(result, str):
            errors.append(result)
        else:
            calls.append(result)
        pos = end + len(CALL_CLOSE)
    content = "".join(pieces)
    if CALL_CLOSE in content:
        errors.append(f"stray {CALL_CLOSE} without a matching {CALL_OPEN}")
    return content, calls, errors


def parse_assistant(text: str) -> ParsedAssistant:
    """Parse one sampled assistant reply (decoded with special tokens kept).

    Text after <|end|> or <|endoftext|> is ignored. Content is the text outside the think block
    and the tool calls, "" when that is only whitespace.

    Args:
        text: the decoded completion.

    Returns:
        ParsedAssistant; `errors` lists every malformed part, the well-formed calls are kept.
    """
    for stop in (END, EOS):
        text = text.split(stop, 1)[0]
    reasoning, rest, errors = split_thinking(text)
    content, calls, call_errors = _scan_calls(rest)
    if not content.strip():
        content = ""
    return ParsedAssistant(reasoning, content, calls, errors + call_errors)


def to_message(parsed: ParsedAssistant) -> Message:
    """The assistant Message of a parsed reply (errors are not part of the message)."""
    return Message(
        role="assistant",
        content=parsed.content,
        reasoning=parsed.reasoning,
        tool_calls=list(parsed.tool_calls),
    )


def _openai_call(item: Any, n: int) -> ToolCall | str:
    if not isinstance(item, dict):
        return f"tool call {n}: expected an object, got {json_type_name(item)}"
    fn = item.get("function")
    if not isinstance(fn, dict):
        return f'tool call {n}: missing "function" object'
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        return f'tool call {n}: "function.name" must be a non-empty string'
    args = fn.get("arguments")
    if args is None or (isinstance(args, str) and not args.strip()):
        args = {}
    elif isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError as e:
            return f"tool call {n} ({name}): arguments are not valid JSON ({e.msg}): {_clip(args)}"
    if not isinstance(args, dict):
        got = json_type_name(args)
        return f'tool call {n} ({name}): "arguments" must be a JSON object, got {got}'
    return ToolCall(name=name, arguments=args, id=str(item.get("id") or ""))


def parse_openai_message(choice_message: dict[str, Any]) -> ParsedAssistant:
    """Parse an OpenAI chat-completions `choices[i].message` without raising.

    `tool_calls[].function.arguments` is a JSON string; reasoning is read from
    `reasoning_content` or `reasoning`. A server that left our tags in the content (no tool
    parser configured) is handled by parsing the content with `parse_assistant`.
    """
    content = choice_message.get("content") or ""
    reasoning = choice_message.get("reasoning_content", choice_message.get("reasoning"))
    raw_calls = choice_message.get("tool_calls") or []
    if not raw_calls and (CALL_OPEN in content or THINK_CLOSE in content):
        parsed = parse_assistant(content)
        if reasoning is not None:
            parsed.reasoning = reasoning
        return parsed
    calls: list[ToolCall] = []
    errors: list[str] = []
    for n, item in enumerate(raw_calls, start=1):
        result = _openai_call(item, n)
        if isinstance(result, str):
            errors.append(result)
        else:
            calls.append(result)
    return ParsedAssistant(reasoning, content, calls, errors)


def parse_openai_tool_calls(choice_message: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of an OpenAI `choices[i].message`.

    Raises:
        ValueError: naming each malformed call (use `parse_openai_message` to collect errors
            instead, as an agent loop should).
    """
    parsed = parse_openai_message(choice_message)
    if parsed.errors:
        raise ValueError("; ".join(parsed.errors))
    return parsed.tool_calls
