"""The chat template: messages -> spans of text, each marked trainable or not.

Rendering produces a list of `Span`s rather than one string so that the loss mask is decided
here, once, by the same code that writes the text; `arcforge.chat.encoding` then tokenizes span
by span, so mask boundaries fall exactly on span boundaries (see tokens.py for the shape).

Loss mask rule: only assistant text is trained (its thinking block, content, tool calls and the
closing <|end|>, which teaches the model to stop). Role headers, the "\\n" after <|end|>, system,
user and tool text, and every span of a message marked `train=False` are context only.

Thinking modes (`ThinkingConfig`, plus the per-turn switch `Message.thinking` on user messages).
A turn is a user message and everything up to the next user message.
- Interleaved thinking: every assistant message of a turn (each tool-calling step and the
  final reply) has its own think block `<think>\\n{reasoning}\\n</think>\\n`.
- Preserved (`preserve=True`): earlier turns' think blocks stay in the context and their
  assistant messages are trained. The rendering equals the token stream the model produced,
  so a token-in-token-out agent loop and a re-render agree (see encoding.observation_ids).
- Dropped (`preserve=False`, the default): assistant messages of earlier turns (before the
  last user message) are rendered without any think block and are NOT trained. Why not trained:
  with thinking on, the model never produces a reply without thinking; training on those
  stripped replies would teach it to answer without thinking. They are the context the model
  sees at inference after the serving template drops old reasoning. To train every turn in
  dropped mode, render each prefix from `turn_prefixes` (one example per turn).
- Turn-level switch: a user message with `thinking=False` renders the assistant messages of
  its turn with an empty block `<think>\\n\\n</think>\\n` placed in the prompt (template, not
  trained: at inference the generation prompt already ends with it, so the model goes straight
  to the answer); `thinking=True` forces thinking on; None follows `ThinkingConfig.enabled`.
  With thinking off any `reasoning` a message carries is not rendered.
  With thinking on, an assistant message without reasoning gets an empty block that IS
  trained (the model opens and closes <think> itself after a bare `<|assistant|>\\n` prompt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from arcforge.chat.tokens import (
    ASSISTANT,
    CALL_CLOSE,
    CALL_OPEN,
    END,
    ROLE_TOKENS,
    THINK_CLOSE,
    THINK_OPEN,
)
from arcforge.types import Message, Tool, ToolCall

EMPTY_THINK = f"{THINK_OPEN}\n\n{THINK_CLOSE}\n"
TOOLS_HEADER = "# Tools\n"
TOOLS_INSTRUCTION = (
    f'To call a tool, write {CALL_OPEN}{{"name": "<tool name>", "arguments": {{<arguments as a '
    f"JSON object>}}}}{CALL_CLOSE}; one reply may hold several calls."
)

# Kinds whose text comes from outside the model (system prompt, tool schemas, user text, tool
# output). They are tokenized literally: a "<|end|>" inside them is plain text, never the
# special token, so that such text cannot forge the template's structure.
LITERAL_KINDS = frozenset({"system", "tools", "user", "observation"})
_PAYLOAD_KIND = {"system": "system", "user": "user", "tool": "observation"}


@dataclass(frozen=True)
class ThinkingConfig:
    """How thinking blocks are rendered (see the module docstring for the modes).

    enabled: the default for turns whose user message leaves `thinking` as None.
    preserve: keep (and train) earlier turns' thinking; False drops it and masks those turns.
    """

    enabled: bool = True
    preserve: bool = False


@dataclass(frozen=True)
class Span:
    """A piece of rendered text.

    kind: template (headers, separators, the tools heading and instruction, an empty think block
    given in the prompt), system, tools (schema lines), user, observation (tool output), and the
    assistant's reasoning (the whole think block), content, tool_call (the whole
    <tool_call>...</tool_call>) and end (<|end|>, any role).
    """

    text: str
    trainable: bool
    role: str
    kind: str

    @property
    def literal(self) -> bool:
        """True when special-token strings in the text must be tokenized as plain text."""
        return self.kind in LITERAL_KINDS


def call_json(call: ToolCall) -> str:
    """The JSON body of a rendered tool call: one line, name then arguments."""
    return json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)


SCHEMA_KEY_ORDER = {
    k: i
    for i, k in enumerate(
        (
            "type",
            "function",
            "name",
            "description",
            "parameters",
            "properties",
            "items",
            "enum",
            "default",
            "required",
        )
    )
}


def canonical_schema(obj: Any) -> Any:
    """A JSON schema with every object's keys in one fixed order: known keys first (type,
    name, description, parameters, properties, ..., required), others sorted; a `properties`
    object lists the required parameters first, in `required`'s order, then the rest sorted.

    Why: the same tool reaches the template from different places (an environment's Tool, a
    schema read back from JSONL, an OpenAI request), and a JSON round trip with sorted keys
    used to put `properties` before `type`; a prompt that differs between SFT data and the
    agent loop is a train/inference mismatch for a small model.
    """
    if isinstance(obj, list):
        return [canonical_schema(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k in sorted(obj, key=lambda k: (SCHEMA_KEY_ORDER.get(k, len(SCHEMA_KEY_ORDER)), k)):
        v = obj[k]
        if k == "properties" and isinstance(v, dict):
            req = [r for r in obj.get("required") or () if isinstance(r, str) and r in v]
            names = req + sorted(n for n in v if n not in req)
            out[k] = {n: canonical_schema(v[n]) for n in names}
        else:
            out[k] = canonical_schema(v)
    return out


def tool_line(tool: Tool) -> str:
    """One tool's schema as one JSON line, keys in canonical order (`canonical_schema`)."""
    return json.dumps(canonical_schema(tool.schema()), ensure_ascii=False)


def turn_thinking(user: Message | None, thinking: ThinkingConfig) -> bool:
    """Whether the turn opened by `user` thinks: its switch if set, else the config default."""
    if user is not None and user.thinking is not None:
        return user.thinking
    return thinking.enabled


def generation_prompt(think: bool) -> list[Span]:
    """The spans that open an assistant reply: `<|assistant|>\\n`, plus the empty think block
    when thinking is off for the turn."""
    spans = [Span(f"{ASSISTANT}\n", False, "assistant", "template")]
    if not think:
        spans.append(Span(EMPTY_THINK, False, "assistant", "template"))
    return spans


def system_spans(message: Message | None, tools: list[Tool] | None) -> list[Span]:
    """A system block; with tools, a "# Tools" section (one schema per line) and the
    one-line call instruction follow the system text."""
    content = message.content if message is not None else ""
    spans = [Span(f"{ROLE_TOKENS['system']}\n", False, "system", "template")]
    if content:
        spans.append(Span(content, False, "system", "system"))
    if tools:
        sep = "\n\n" if content else ""
        spans.append(Span(sep + TOOLS_HEADER, False, "system", "template"))
        lines = "".join(tool_line(t) + "\n" for t in tools)
        spans.append(Span(lines, False, "system", "tools"))
        spans.append(Span(TOOLS_INSTRUCTION, False, "system", "template"))
    spans += _close("system", trainable=False)
    return spans


def plain_spans(message: Message) -> list[Span]:
    """A system, user or tool message: header, literal text, <|end|>, newline; never trained."""
    role = message.role
    if role not in _PAYLOAD_KIND:
        raise ValueError(f"plain_spans takes a system, user or tool message, got role {role!r}")
    spans = [Span(f"{ROLE_TOKENS[role]}\n", False, role, "template")]
    if message.content:
        spans.append(Span(message.content, False, role, _PAYLOAD_KIND[role]))
    return spans + _close(role, trainable=False)


def assistant_spans(message: Message, think: bool, drop_thinking: bool = False) -> list[Span]:
    """An assistant message.

    Args:
        message: the assistant message; `train=False` masks all of it.
        think: whether its turn thinks (False renders the untrained empty block).
        drop_thinking: an earlier turn in dropped mode: no think block, nothing trained.

    Returns:
        header, think block, content, one span per tool call, <|end|>, newline.
    """
    train = message.train and not drop_thinking
    spans = [Span(f"{ASSISTANT}\n", False, "assistant", "template")]
    if not drop_thinking:
        if think:
            block = f"{THINK_OPEN}\n{message.reasoning or ''}\n{THINK_CLOSE}\n"
            spans.append(Span(block, train, "assistant", "reasoning"))
        else:
            spans.append(Span(EMPTY_THINK, False, "assistant", "template"))
    if message.content:
        spans.append(Span(message.content, train, "assistant", "content"))
    for call in message.tool_calls:
        text = f"{CALL_OPEN}{call_json(call)}{CALL_CLOSE}"
        spans.append(Span(text, train, "assistant", "tool_call"))
    return spans + _close("assistant", trainable=train)


def _close(role: str, trainable: bool) -> list[Span]:
    return [Span(END, trainable, role, "end"), Span("\n", False, role, "template")]


def last_user_index(messages: list[Message]) -> int:
    """Index of the last user message, -1 when there is none."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return -1


def render(
    messages: list[Message],
    tools: list[Tool] | None = None,
    thinking: ThinkingConfig = ThinkingConfig(),
    add_generation_prompt: bool = False,
) -> list[Span]:
    """Render a conversation to spans (see the module docstring for the modes and the mask).

    Args:
        messages: the conversation. Tools go into the first message's system block when it is
            a system message; otherwise a system block holding only the tools is created.
        tools: tools offered to the model, or None.
        thinking: default thinking switch and preserved/dropped mode.
        add_generation_prompt: end with the prompt that opens the next assistant reply.

    Returns:
        The spans in order; "".join(s.text for s in spans) is the rendered text.
    """
    spans: list[Span] = []
    has_system = bool(messages) and messages[0].role == "system"
    if tools and not has_system:
        spans += system_spans(None, tools)
    current = last_user_index(messages)
    think = turn_thinking(None, thinking)
    for i, m in enumerate(messages):
        if m.role == "user":
            think = turn_thinking(m, thinking)
        if m.role == "assistant":
            drop = not thinking.preserve and i < current
            spans += assistant_spans(m, think, drop_thinking=drop)
        elif i == 0 and has_system:
            spans += system_spans(m, tools)
        elif m.role in _PAYLOAD_KIND:
            spans += plain_spans(m)
        else:
            raise ValueError(f"message {i}: unknown role {m.role!r} (system|user|assistant|tool)")
    if add_generation_prompt:
        spans += generation_prompt(think)
    return spans


def turn_prefixes(messages: list[Message]) -> list[list[Message]]:
    """One prefix per turn that has an assistant reply, each ending with that turn.

    In dropped mode only the last turn of a rendering is trained; rendering every prefix
    trains each turn once, with exactly the context (earlier thinking dropped) it has at
    inference.
    """
    starts = [i for i, m in enumerate(messages) if m.role == "user"] + [len(messages)]
    if len(starts) == 1:  # no user message: the whole conversation is one turn
        starts = [0, len(messages)]
    prefixes = []
    for a, b in zip(starts, starts[1:]):
        if any(m.role == "assistant" for m in messages[a:b]):
            prefixes.append(messages[:b])
    return prefixes
