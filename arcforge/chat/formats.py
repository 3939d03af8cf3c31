"""Chat formats: how one checkpoint's conversations become token ids, loss masks and stop ids.

Two formats share one interface (`ChatFormat`), and every stage talks to the format of its
tokenizer (`chat_format(tokenizer)`), never to a template directly:
- `arcforge` (`ArcforgeFormat`): the format of models arcforge pretrains (arcforge.chat.template:
  `<|user|>`, `<|assistant|>`, `<|end|>`, thinking modes), unchanged.
- `native` (`NativeFormat`): a real checkpoint's own Jinja chat template, rendered with
  `tokenizer.apply_chat_template` (messages, tools, reasoning, `chat_template_kwargs` such as
  `enable_thinking`), and its tool-call dialect (arcforge.chat.dialects). No token is added and
  no embedding resized.

Native loss masks. Templates rarely mark assistant text (`{% generation %}`), so the mask is
derived from what the template emits: for assistant message i, the text between the render of
messages[:i] with the generation prompt and the render of messages[:i+1] is that message; it is
trained (up to and including the stop token that ends it, which some templates write at the
start of the next message, GLM's `<|observation|>` or `<|user|>`) when both renders are
prefixes of the whole conversation's render. A template that re-renders an earlier message
differently once the conversation goes on (Qwen3, GLM and MiniMax drop the reasoning of turns
before the last user message) leaves that message untrained in this render: it is context, as
in arcforge's dropped-thinking mode; to train every turn, train each turn's prefix (one example
per turn, `turn_prefixes`). The text is tokenized piece by piece at the mask boundaries, so a
boundary is always a token boundary.

Token-in-token-out. The agent loop tokenizes the first prompt (`prompt_ids`), appends the
sampled ids exactly (ending with a stop id), then `observation_ids(history, new, tools)`: the
template's text after the assistant's stop token up to the next generation prompt. It is the
difference between the render of the history and the render of history + new messages (with
the generation prompt); when the template re-renders the history (dropped reasoning at a new
user turn), the difference is taken on a one-message stand-in history, so the stream keeps
what was sampled (`needs_rerender` tells the loop when a re-rendered split is what the
template would serve).

Templates without tool support (SmolLM2's ChatML) get the documented default tool block
(Hermes style: the schemas in `<tools>` in the system message, calls in `<tool_call>` JSON,
results in `<tool_response>`), applied at render time; the checkpoint's template is kept as it is.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Any

from arcforge.chat.dialects import DIALECTS, Dialect, detect_dialect, get_dialect
from arcforge.chat.encoding import _TOKENIZE_LOCK, Encoded
from arcforge.chat.parse import ParsedAssistant
from arcforge.types import Message, Tool, ToolCall

FORMATS = ("arcforge", "native")

DEFAULT_TOOL_BLOCK = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)
_MARK = "\u2063arcforge\u2063"  # stand-in assistant text that no template writes itself


def tool_schemas(tools: list[Tool] | list[dict] | None) -> list[dict[str, Any]] | None:
    """OpenAI function-tool dicts of arcforge Tools (dicts pass through); None when empty."""
    if not tools:
        return None
    return [t if isinstance(t, dict) else t.schema() for t in tools]


def message_dict(m: Message, index: int = 0) -> dict[str, Any]:
    """The OpenAI-shaped dict a chat template reads; tool-call arguments stay objects (GLM's,
    MiniMax's and Llama's templates iterate them)."""
    d: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.reasoning is not None:
        d["reasoning_content"] = m.reasoning
    if m.tool_calls:
        d["tool_calls"] = [
            {
                "id": c.id or f"call_{index}_{j}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for j, c in enumerate(m.tool_calls)
        ]
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        d["name"] = m.name
    return d


class ChatFormat:
    """The interface every stage uses (see the module docstring)."""

    name: str
    tokenizer: Any
    dialect: Dialect

    def encode(
        self,
        messages: list[Message],
        tools: list[Tool] | None = None,
        add_generation_prompt: bool = False,
    ) -> Encoded:
        raise NotImplementedError

    def prompt_ids(self, messages: list[Message], tools: list[Tool] | None = None) -> list[int]:
        return list(self.encode(messages, tools, add_generation_prompt=True).input_ids)

    def observation_ids(
        self, history: list[Message], new: list[Message], tools: list[Tool] | None = None
    ) -> list[int]:
        raise NotImplementedError

    def parse(self, text: str, tools: list[Tool] | None = None) -> ParsedAssistant:
        return self.dialect.parse(text, tools)

    def stop_ids(self) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def parse_ids(self, ids: list[int], tools: list[Tool] | None = None) -> ParsedAssistant:
        return self.parse(self.decode(ids), tools)


class ArcforgeFormat(ChatFormat):
    """arcforge's own format (arcforge.chat.template), with a thinking config."""

    name = "arcforge"

    def __init__(self, tokenizer: Any, thinking: Any = None) -> None:
        from arcforge.chat.template import ThinkingConfig

        self.tokenizer = tokenizer
        self.thinking = thinking or ThinkingConfig()
        self.dialect = DIALECTS["hermes"]

    def encode(self, messages, tools=None, add_generation_prompt=False) -> Encoded:
        from arcforge.chat.encoding import render_ids

        return render_ids(messages, self.tokenizer, tools, self.thinking, add_generation_prompt)

    def observation_ids(self, history, new, tools=None) -> list[int]:
        from arcforge.chat.encoding import observation_ids

        return observation_ids(new, self.tokenizer, self.thinking)

    def parse(self, text: str, tools=None) -> ParsedAssistant:
        from arcforge.chat.parse import parse_assistant

        return parse_assistant(text)

    def stop_ids(self) -> list[int]:
        from arcforge.chat.tokens import END, EOS

        return [int(self.tokenizer.convert_tokens_to_ids(t)) for t in (END, EOS)]


@dataclass
class NativeFormat(ChatFormat):
    """A checkpoint's own chat template and tool-call dialect.

    template_kwargs: passed to the template (`enable_thinking`, ...). dialect: a name from
    arcforge.chat.dialects, or None to detect it from the template. eos_ids: the checkpoint's
    generation-config eos ids (the dialect's end tokens are added when the vocabulary has them).
    """

    tokenizer: Any
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    dialect_name: str | None = None
    eos_ids: list[int] = field(default_factory=list)
    name: str = "native"

    def __post_init__(self) -> None:
        template = getattr(self.tokenizer, "chat_template", None)
        if not isinstance(template, str) or not template.strip():
            raise ValueError(
                "chat.format native needs the checkpoint's chat template, and this tokenizer has "
                "none; use chat.format: arcforge, or a checkpoint with a chat_template"
            )
        self.template = template
        self.dialect = (
            get_dialect(self.dialect_name) if self.dialect_name else detect_dialect(template)
        )
        self.has_tools = "tools" in template
        self.has_reasoning = "reasoning_content" in template
        self._stops = self._find_stops()

    # -- rendering --------------------------------------------------------------------------
    def _dicts(self, messages: list[Message], tools: list[Tool] | None) -> tuple[list[dict], Any]:
        schemas = tool_schemas(tools)
        out = []
        for i, m in enumerate(messages):
            if not self.has_reasoning and m.reasoning is not None and self.dialect.think_open:
                m = replace(m, reasoning=None, content=self._inline_reasoning(m))
            if self.has_tools:
                out.append(message_dict(m, i))
                continue
            # the default tool block: calls as dialect text, results wrapped, schemas in system
            d = message_dict(replace(m, tool_calls=[]), i)
            d.pop("tool_call_id", None)
            if m.role == "assistant" and m.tool_calls:
                sep = "\n" if m.content else ""
                d["content"] = m.content + sep + self.dialect.render_calls(m.tool_calls)
            elif m.role == "tool":
                d["content"] = f"<tool_response>\n{m.content}\n</tool_response>"
            out.append(d)
        if not self.has_tools and schemas:
            block = DEFAULT_TOOL_BLOCK.format(
                tools="\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
            )
            if out and out[0]["role"] == "system":
                out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{block}"}
            else:
                out.insert(0, {"role": "system", "content": block})
            schemas = None
        return out, schemas

    def _inline_reasoning(self, m: Message) -> str:
        """Reasoning for a template that has no field for it: a think block before the content."""
        return f"{self.dialect.think_open}\n{m.reasoning}\n{self.dialect.think_close}\n{m.content}"

    def render_text(
        self,
        messages: list[Message],
        tools: list[Tool] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """The template's text for a conversation (what `apply_chat_template` returns)."""
        dicts, schemas = self._dicts(messages, tools)
        return self._apply(dicts, schemas, add_generation_prompt)

    def _apply(self, dicts: list[dict], schemas: Any, gen: bool) -> str:
        kwargs = dict(self.template_kwargs)
        return self.tokenizer.apply_chat_template(
            dicts, tools=schemas, add_generation_prompt=gen, tokenize=False, **kwargs
        )

    def _tokenize(self, text: str) -> list[int]:
        with _TOKENIZE_LOCK:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _stop_strings(self) -> list[str]:
        return [self.tokenizer.convert_ids_to_tokens(i) for i in self._stops]

    def assistant_ranges(
        self, messages: list[Message], tools: list[Tool] | None, full: str
    ) -> list[tuple[int, int]]:
        """Character ranges of `full` that are trained assistant text (module docstring)."""
        dicts, schemas = self._dicts(messages, tools)
        stops = self._stop_strings()
        ranges: list[tuple[int, int]] = []
        shift = len(dicts) - len(messages)  # the default tool block may prepend a system dict
        for i, m in enumerate(messages):
            if m.role != "assistant" or not m.train:
                continue
            try:
                before = self._apply(dicts[: i + shift], schemas, True)
                upto = self._apply(dicts[: i + shift + 1], schemas, False)
            except Exception:  # a template that refuses a prefix (e.g. must end on a user turn)
                continue
            if not (upto.startswith(before) and full.startswith(before)):
                continue
            body = upto[len(before) :]
            if not full.startswith(before + body.rstrip()):
                continue
            start, end = len(before), len(before) + len(body)
            # end at the first stop token inside the message, or the one that opens the next
            cut = _first_stop(full, start, stops)
            if cut is not None and cut[0] < end:
                end = cut[1]
            else:
                stripped = start + len(body.rstrip())
                if cut is not None and not full[stripped : cut[0]].strip():
                    end = cut[1]
                else:
                    end = stripped
            ranges.append((start, end))
        return ranges

    def encode(self, messages, tools=None, add_generation_prompt=False) -> Encoded:
        full = self.render_text(messages, tools, add_generation_prompt)
        ranges = self.assistant_ranges(messages, tools, full)
        ids: list[int] = []
        mask: list[int] = []
        pos = 0
        for s, e in ranges:
            for text, flag in ((full[pos:s], 0), (full[s:e], 1)):
                piece = self._tokenize(text)
                ids += piece
                mask += [flag] * len(piece)
            pos = e
        tail = self._tokenize(full[pos:])
        return Encoded(ids + tail, mask + [0] * len(tail), full)

    def prompt_ids(self, messages, tools=None) -> list[int]:
        return self._tokenize(self.render_text(messages, tools, add_generation_prompt=True))

    # -- token-in-token-out -----------------------------------------------------------------
    def needs_rerender(self, history: list[Message], new: list[Message], tools=None) -> bool:
        """Whether the template renders `history` differently once `new` follows it (e.g.
        reasoning dropped at a new user turn)."""
        a = self.render_text(history, tools, False)
        b = self.render_text(history + new, tools, True)
        return not b.startswith(a)

    def observation_ids(self, history, new, tools=None) -> list[int]:
        stops = self._stop_strings()
        a = self.render_text(history, tools, False)
        b = self.render_text(history + new, tools, True)
        if b.startswith(a) and history and history[-1].role == "assistant":
            last = history[-1]
            post = self._post_text(history[:-1], last, tools)
            return self._tokenize(_after_stop(post + b[len(a) :], stops))
        stand_in = [Message("user", "x"), Message("assistant", _MARK)]
        a = self.render_text(stand_in, tools, False)
        b = self.render_text(stand_in + list(new), tools, True)
        tail = b[a.rindex(_MARK) + len(_MARK) :]
        return self._tokenize(_after_stop(tail, stops))

    def _post_text(self, before: list[Message], last: Message, tools) -> str:
        """What the template writes after an assistant message's own text (its stop token and
        separator): taken from a stand-in message in the same position."""
        probe = before + [Message("assistant", _MARK)]
        try:
            text = self.render_text(probe, tools, False)
        except Exception:
            text = self.render_text(
                [Message("user", "x"), Message("assistant", _MARK)], tools, False
            )
        return text[text.rindex(_MARK) + len(_MARK) :]

    # -- stops --------------------------------------------------------------------------------
    def _find_stops(self) -> list[int]:
        vocab = self.tokenizer.get_vocab()
        ids = list(self.eos_ids)
        if self.tokenizer.eos_token_id is not None:
            ids.append(int(self.tokenizer.eos_token_id))
        ids += [vocab[t] for t in self.dialect.end_tokens if t in vocab]
        if not self.has_tools and "<|im_end|>" in vocab:
            ids.append(vocab["<|im_end|>"])
        return list(dict.fromkeys(int(i) for i in ids))

    def stop_ids(self) -> list[int]:
        return list(self._stops)

    def parse(self, text: str, tools=None) -> ParsedAssistant:
        for s in self._stop_strings():
            text = text.split(s, 1)[0]
        return self.dialect.parse(text, tools)

    def reply_text(self, m: Message) -> str:
        """The text a model writes for assistant message `m` (what the template renders for it
        after the generation prompt, without the stop token): scripted replies in tests."""
        full = self.render_text([Message("user", "x"), m], None, False)
        start = self.render_text([Message("user", "x")], None, True)
        # a generation prompt that opens a block itself (MiniMax-M2's "<think>\n") is not a
        # prefix of a rendered reply without reasoning: the reply starts where they part
        body = full[len(os.path.commonprefix([full, start])) :]
        cut = _first_stop(body, 0, self._stop_strings())
        return body[: cut[0]] if cut else body.rstrip()


def _first_stop(text: str, start: int, stops: list[str]) -> tuple[int, int] | None:
    """(start, end) of the earliest stop string in text[start:]."""
    best: tuple[int, int] | None = None
    for s in stops:
        if not s:
            continue
        k = text.find(s, start)
        if k >= 0 and (best is None or k < best[0]):
            best = (k, k + len(s))
    return best


def _after_stop(text: str, stops: list[str]) -> str:
    """`text` without a leading stop token (the model sampled it already)."""
    for s in stops:
        if s and text.startswith(s):
            return text[len(s) :]
        if s and text.lstrip().startswith(s) and not text[: text.find(s)].strip():
            return text[text.find(s) + len(s) :]
    return text


def is_arcforge_tokenizer(tokenizer: Any) -> bool:
    """True when the tokenizer carries arcforge's chat template (a model arcforge pretrained)."""
    from arcforge.chat.jinja import CHAT_TEMPLATE

    return getattr(tokenizer, "chat_template", None) == CHAT_TEMPLATE


def chat_format(tokenizer: Any) -> ChatFormat:
    """The format attached to `tokenizer` (`attach_format`), else the one its template implies."""
    fmt = getattr(tokenizer, "arcforge_chat_format", None)
    if fmt is not None:
        return fmt
    if is_arcforge_tokenizer(tokenizer) or not getattr(tokenizer, "chat_template", None):
        fmt = ArcforgeFormat(tokenizer)
    else:
        fmt = NativeFormat(tokenizer)
    tokenizer.arcforge_chat_format = fmt
    return fmt


def attach_format(
    tokenizer: Any,
    fmt: str = "auto",
    template_kwargs: dict[str, Any] | None = None,
    dialect: str | None = None,
    eos_ids: list[int] | None = None,
    thinking: Any = None,
) -> ChatFormat:
    """Build the format `fmt` ("auto": native unless the template is arcforge's) and attach it."""
    if fmt not in (*FORMATS, "auto"):
        raise ValueError(f"chat.format must be one of {FORMATS} or auto, got {fmt!r}")
    if fmt == "auto":
        fmt = "arcforge" if is_arcforge_tokenizer(tokenizer) else "native"
    if fmt == "arcforge":
        out: ChatFormat = ArcforgeFormat(tokenizer, thinking)
    else:
        out = NativeFormat(tokenizer, dict(template_kwargs or {}), dialect, list(eos_ids or []))
    tokenizer.arcforge_chat_format = out
    return out


def scripted_reply(
    fmt: ChatFormat, reasoning: str | None, content: str, calls: list[ToolCall]
) -> str:
    """The text a model in `fmt` writes for a reply (without the stop token)."""
    m = Message("assistant", content, reasoning=reasoning, tool_calls=list(calls))
    if isinstance(fmt, NativeFormat):
        return fmt.reply_text(m)
    from arcforge.chat.template import render

    spans = render([Message("user", "x"), m], None, fmt.thinking, False)
    text = "".join(s.text for s in spans if s.trainable)
    from arcforge.chat.tokens import END

    return text.split(END, 1)[0]
