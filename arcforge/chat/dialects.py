"""Tool-call dialects: how each model family writes tool calls and thinking, parsed and rendered.

A checkpoint keeps the tool-call format it was trained in (the one vLLM's and SGLang's
`--tool-call-parser` and every client expect). A `Dialect` knows, for one family:
- `parse(text, tools)`: a sampled reply (decoded with special tokens kept) -> reasoning,
  content and tool calls, never raising: every malformed part is an entry in `errors`;
- `render_calls(calls)`: the text the family's template writes for a list of calls (used to
  write scripted replies and by templates that have no tool support of their own);
- its thinking tags and the end tokens a reply stops at when a checkpoint's generation config
  does not list them (vocabulary-only tokenizers).

Families (the vLLM parser of the same format in brackets):
- `hermes` (hermes; Qwen2.5, Qwen3, Hermes, SmolLM3, and the default block for templates without
  tools): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`;
- `glm45` (glm45; GLM-4.5/4.6/4.7 and the GLM-5 line):
  `<tool_call>name\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>`;
- `minimax_m2` (minimax_m2): `<minimax:tool_call>\\n<invoke name="f">\\n<parameter name="k">v
  </parameter>\\n</invoke>\\n</minimax:tool_call>`;
- `kimi_k2` (kimi_k2): `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0
  <|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>`;
- `llama3_json` (llama3_json; Llama 3.1/3.2/3.3): the reply is `{"name": ..., "parameters":
  {...}}` (optionally after `<|python_tag|>`), several separated by `;`.

In the XML dialects (glm45, minimax_m2) argument values are text: a value is JSON-decoded when
the tool's schema types it as something other than a string, or, without a schema, when it
parses as JSON; otherwise it stays a string (as vLLM's parsers do).

`detect_dialect(template)` picks the family from a chat template's text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from arcforge.chat.parse import ParsedAssistant, json_type_name, parse_call_json
from arcforge.types import ToolCall


def _clip(text: str, n: int = 80) -> str:
    text = text.strip()
    return text if len(text) <= n else text[: n - 3] + "..."


def _schema_types(tools: list[Any] | None) -> dict[str, dict[str, Any]]:
    """{tool name: {argument: JSON-schema type}} from arcforge Tools or OpenAI tool dicts."""
    out: dict[str, dict[str, Any]] = {}
    for t in tools or []:
        if isinstance(t, dict):
            fn = t.get("function", t)
            name, params = fn.get("name"), fn.get("parameters") or {}
        else:
            name, params = t.name, t.parameters
        props = params.get("properties") or {} if isinstance(params, dict) else {}
        out[str(name)] = {k: (v or {}).get("type") for k, v in props.items() if isinstance(v, dict)}
    return out


def _coerce(value: str, typ: Any) -> Any:
    """An XML argument's text as the value its schema type asks for."""
    if typ == "string" or (isinstance(typ, list) and typ == ["string"]):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, ValueError):
        return value


@dataclass(frozen=True)
class Dialect:
    """One family's tool-call and thinking format (see the module docstring)."""

    name: str
    call_open: str
    call_close: str
    think_open: str | None = "<think>"
    think_close: str | None = "</think>"
    end_tokens: tuple[str, ...] = ()
    # the special tokens the family's vocabulary has as single ids (a stand-in vocabulary gets
    # them added so that stop ids and masks behave as with the real one)
    special_tokens: tuple[str, ...] = ()

    # -- thinking -----------------------------------------------------------------------
    def split_thinking(self, text: str) -> tuple[str | None, str, list[str]]:
        """(reasoning, rest, errors). A reply holding only the close tag continues a think
        block the generation prompt opened (MiniMax-M2's prompt ends with `<think>\\n`)."""
        if not self.think_open or not self.think_close:
            return None, text, []
        stripped = text.lstrip()
        if stripped.startswith(self.think_open):
            body = stripped[len(self.think_open) :]
            close = body.find(self.think_close)
            if close < 0:
                return body.strip("\n"), "", [f"unclosed {self.think_open}: no {self.think_close}"]
            return body[:close].strip("\n"), body[close + len(self.think_close) :].lstrip("\n"), []
        close = text.find(self.think_close)
        if close >= 0 and self.think_open not in text[:close]:
            return text[:close].strip("\n"), text[close + len(self.think_close) :].lstrip("\n"), []
        return None, text, []

    # -- tool calls ---------------------------------------------------------------------
    def parse_call(self, body: str, n: int, types: dict[str, dict[str, Any]]) -> ToolCall | str:
        raise NotImplementedError

    def render_call(self, call: ToolCall, index: int) -> str:
        raise NotImplementedError

    def render_calls(self, calls: list[ToolCall]) -> str:
        """The text of `calls` as the family's template writes them (without thinking)."""
        return "".join(self.render_call(c, i) for i, c in enumerate(calls))

    def _scan(self, rest: str, types: dict[str, dict[str, Any]]) -> tuple[str, list, list]:
        pieces: list[str] = []
        calls: list[ToolCall] = []
        errors: list[str] = []
        pos, n = 0, 0
        while True:
            start = rest.find(self.call_open, pos)
            if start < 0:
                pieces.append(rest[pos:])
                break
            pieces.append(rest[pos:start])
            n += 1
            end = rest.find(self.call_close, start + len(self.call_open))
            if end < 0:
                body = rest[start + len(self.call_open) :]
                errors.append(
                    f"tool call {n}: unclosed {self.call_open} (no {self.call_close}): {_clip(body)}"
                )
                break
            result = self.parse_call(rest[start + len(self.call_open) : end], n, types)
            if isinstance(result, str):
                errors.append(result)
            else:
                calls.append(result)
            pos = end + len(self.call_close)
        content = "".join(pieces)
        if self.call_close in content:
            errors.append(f"stray {self.call_close} without a matching {self.call_open}")
        return content, calls, errors

    def parse(self, text: str, tools: list[Any] | None = None) -> ParsedAssistant:
        """Parse one sampled reply; text after an end token is ignored."""
        for stop in self.end_tokens:
            text = text.split(stop, 1)[0]
        reasoning, rest, errors = self.split_thinking(text)
        content, calls, call_errors = self._scan(rest, _schema_types(tools))
        content = content.strip()
        return ParsedAssistant(reasoning, content, calls, errors + call_errors)


class HermesDialect(Dialect):
    def parse_call(self, body: str, n: int, types: dict[str, dict[str, Any]]) -> ToolCall | str:
        return parse_call_json(body.strip(), n)

    def render_call(self, call: ToolCall, index: int) -> str:
        obj = {"name": call.name, "arguments": call.arguments}
        return f"{self.call_open}\n{json.dumps(obj, ensure_ascii=False)}\n{self.call_close}"


_NAME = re.compile(r"[A-Za-z_][\w.\-]*")  # a function name
_GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


class GlmDialect(Dialect):
    def parse_call(self, body: str, n: int, types: dict[str, dict[str, Any]]) -> ToolCall | str:
        head, sep, _ = body.partition("<arg_key>")
        name = head.strip()
        if not name:
            return f"tool call {n}: no function name before the arguments: {_clip(body)}"
        if not _NAME.fullmatch(name):
            return f"tool call {n}: malformed function name {_clip(name)!r}"
        args_text = body[len(head) :]
        pairs = _GLM_PAIR.findall(args_text)
        leftover = _GLM_PAIR.sub("", args_text).strip()
        if leftover:
            return f"tool call {n} ({name}): text outside <arg_key>/<arg_value> pairs: {_clip(leftover)}"
        schema = types.get(name, {})
        return ToolCall(
            name=name, arguments={k.strip(): _coerce(v, schema.get(k.strip())) for k, v in pairs}
        )

    def render_call(self, call: ToolCall, index: int) -> str:
        parts = [f"{self.call_open}{call.name}\n"]
        for k, v in call.arguments.items():
            text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            parts.append(f"<arg_key>{k}</arg_key>\n<arg_value>{text}</arg_value>\n")
        return "".join(parts) + self.call_close


_INVOKE = re.compile(r'<invoke name="([^"]*)">(.*?)</invoke>', re.S)
_PARAM = re.compile(r'<parameter name="([^"]*)">(.*?)</parameter>', re.S)


class MiniMaxDialect(Dialect):
    """One `<minimax:tool_call>` block holds every call of the reply as `<invoke>` elements."""

    def _scan(self, rest: str, types: dict[str, dict[str, Any]]) -> tuple[str, list, list]:
        content, blocks, errors = [], [], []
        pos = 0
        while True:
            start = rest.find(self.call_open, pos)
            if start < 0:
                content.append(rest[pos:])
                break
            content.append(rest[pos:start])
            end = rest.find(self.call_close, start)
            if end < 0:
                errors.append(f"unclosed {self.call_open} (no {self.call_close})")
                break
            blocks.append(rest[start + len(self.call_open) : end])
            pos = end + len(self.call_close)
        calls: list[ToolCall] = []
        n = 0
        for block in blocks:
            invokes = _INVOKE.findall(block)
            if not invokes:
                errors.append(f"tool call block without <invoke name=...>: {_clip(block)}")
            if _INVOKE.sub("", block).strip():
                errors.append(f"text outside <invoke> elements: {_clip(_INVOKE.sub('', block))}")
            for name, body in invokes:
                n += 1
                if not _NAME.fullmatch(name):
                    errors.append(f"tool call {n}: malformed invoke name {_clip(name)!r}")
                    continue
                schema = types.get(name, {})
                params = _PARAM.findall(body)
                if _PARAM.sub("", body).strip():
                    errors.append(f"tool call {n} ({name}): text outside <parameter> elements")
                    continue
                args = {k: _coerce(v.strip("\n"), schema.get(k)) for k, v in params}
                calls.append(ToolCall(name=name, arguments=args))
        return "".join(content), calls, errors

    def render_calls(self, calls: list[ToolCall]) -> str:
        if not calls:
            return ""
        body = []
        for c in calls:
            params = "".join(
                f'<parameter name="{k}">{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</parameter>\n'
                for k, v in c.arguments.items()
            )
            body.append(f'<invoke name="{c.name}">\n{params}</invoke>\n')
        return f"{self.call_open}\n{''.join(body)}{self.call_close}"


_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(.*?)\s*<\|tool_call_argument_begin\|>(.*?)<\|tool_call_end\|>", re.S
)


class KimiDialect(Dialect):
    """Calls are `functions.<name>:<index>` ids with JSON arguments, inside one section."""

    def _scan(self, rest: str, types: dict[str, dict[str, Any]]) -> tuple[str, list, list]:
        start = rest.find(self.call_open)
        if start < 0:
            return rest, [], []
        end = rest.find(self.call_close, start)
        errors: list[str] = []
        if end < 0:
            errors.append(f"unclosed {self.call_open} (no {self.call_close})")
            end = len(rest)
        section = rest[start + len(self.call_open) : end]
        calls: list[ToolCall] = []
        for n, (cid, args_text) in enumerate(_KIMI_CALL.findall(section), start=1):
            m = re.fullmatch(r"(?:functions\.)?([^:\s]+)(?::\d+)?", cid)
            if not m:
                errors.append(
                    f"tool call {n}: malformed id {cid!r} (expected functions.NAME:INDEX)"
                )
                continue
            try:
                args = json.loads(args_text) if args_text.strip() else {}
            except json.JSONDecodeError as e:
                errors.append(
                    f"tool call {n} ({m.group(1)}): invalid JSON ({e.msg}): {_clip(args_text)}"
                )
                continue
            if not isinstance(args, dict):
                errors.append(
                    f"tool call {n} ({m.group(1)}): arguments must be a JSON object, got {json_type_name(args)}"
                )
                continue
            calls.append(ToolCall(name=m.group(1), arguments=args, id=cid))
        if not calls and not errors:
            errors.append(f"empty tool call section: {_clip(section)}")
        return rest[:start] + rest[end + len(self.call_close) :], calls, errors

    def render_calls(self, calls: list[ToolCall]) -> str:
        if not calls:
            return ""
        body = "".join(
            f"<|tool_call_begin|>functions.{c.name}:{i}<|tool_call_argument_begin|>"
            f"{json.dumps(c.arguments, ensure_ascii=False)}<|tool_call_end|>"
            for i, c in enumerate(calls)
        )
        return f"{self.call_open}{body}{self.call_close}"


class Llama3Dialect(Dialect):
    """A reply that is a JSON object with "name" and "parameters" (or "arguments") is a call."""

    def _scan(self, rest: str, types: dict[str, dict[str, Any]]) -> tuple[str, list, list]:
        text = rest.strip()
        text = text.removeprefix(self.call_open).strip()
        if not text.startswith("{"):
            return rest, [], []
        calls: list[ToolCall] = []
        errors: list[str] = []
        dec = json.JSONDecoder()
        pos, n = 0, 0
        while pos < len(text):
            n += 1
            try:
                obj, end = dec.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                return (
                    rest,
                    calls,
                    errors + [f"tool call {n}: invalid JSON ({e.msg}): {_clip(text[pos:])}"],
                )
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                errors.append(f'tool call {n}: expected {{"name": ..., "parameters": {{...}}}}')
            else:
                args = obj.get("parameters", obj.get("arguments", {}))
                if isinstance(args, dict):
                    calls.append(ToolCall(name=obj["name"], arguments=args))
                else:
                    errors.append(f'tool call {n} ({obj["name"]}): "parameters" must be an object')
            pos = end
            while pos < len(text) and text[pos] in " \n\t;":
                pos += 1
        return "", calls, errors

    def render_call(self, call: ToolCall, index: int) -> str:
        obj = {"name": call.name, "parameters": call.arguments}
        return ("; " if index else "") + json.dumps(obj, ensure_ascii=False)


DIALECTS: dict[str, Dialect] = {
    "hermes": HermesDialect(
        "hermes",
        "<tool_call>",
        "</tool_call>",
        end_tokens=("<|im_end|>", "<|endoftext|>"),
        special_tokens=("<|im_start|>", "<|im_end|>"),
    ),
    "glm45": GlmDialect(
        "glm45",
        "<tool_call>",
        "</tool_call>",
        end_tokens=("<|user|>", "<|observation|>", "<|endoftext|>"),
        special_tokens=(
            "[gMASK]",
            "<sop>",
            "<|system|>",
            "<|user|>",
            "<|assistant|>",
            "<|observation|>",
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "<arg_key>",
            "</arg_key>",
            "<arg_value>",
            "</arg_value>",
            "<tool_response>",
            "</tool_response>",
            "<|endoftext|>",
        ),
    ),
    "minimax_m2": MiniMaxDialect(
        "minimax_m2",
        "<minimax:tool_call>",
        "</minimax:tool_call>",
        end_tokens=("[e~[",),
        special_tokens=(
            "]~!b[",
            "]~b]",
            "[e~[",
            "<think>",
            "</think>",
            "<minimax:tool_call>",
            "</minimax:tool_call>",
        ),
    ),
    "kimi_k2": KimiDialect(
        "kimi_k2",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        end_tokens=("<|im_end|>",),
        special_tokens=(
            "<|im_system|>",
            "<|im_user|>",
            "<|im_assistant|>",
            "<|im_middle|>",
            "<|im_end|>",
            "<|tool_calls_section_begin|>",
            "<|tool_calls_section_end|>",
            "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>",
            "<|tool_call_end|>",
            "<think>",
            "</think>",
        ),
    ),
    "llama3_json": Llama3Dialect(
        "llama3_json",
        "<|python_tag|>",
        "",
        think_open=None,
        think_close=None,
        end_tokens=("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"),
        special_tokens=(
            "<|begin_of_text|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eot_id|>",
            "<|eom_id|>",
            "<|python_tag|>",
        ),
    ),
}


def detect_dialect(template: str | None) -> Dialect:
    """The dialect a chat template writes tool calls in (hermes when it writes none)."""
    t = template or ""
    if "<arg_key>" in t:
        return DIALECTS["glm45"]
    if "minimax:tool_call" in t:
        return DIALECTS["minimax_m2"]
    if "tool_calls_section_begin" in t:
        return DIALECTS["kimi_k2"]
    if "<|start_header_id|>" in t and '"parameters": ' in t:
        return DIALECTS["llama3_json"]
    return DIALECTS["hermes"]


def get_dialect(name: str) -> Dialect:
    if name not in DIALECTS:
        raise ValueError(f"unknown tool-call dialect {name!r}; known: {sorted(DIALECTS)}")
    return DIALECTS[name]
