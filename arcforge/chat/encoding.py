"""Spans -> token ids with the loss mask, and the incremental encoding the agent loop uses.

Each span is tokenized on its own, so a mask boundary is always a token boundary. Template and
assistant spans are tokenized with special tokens recognized ("<|end|>" -> its single id);
system, tool-schema, user and tool-output spans are tokenized literally (special-token strings
inside them become ordinary text tokens), so outside text cannot end a message or open a tool
call. No BOS is added: the rendered text starts with the first role token.

Token-in-token-out (TITO). An agent loop encodes the first prompt with `render_ids(...,
add_generation_prompt=True)`, appends the model's tokens exactly as sampled (up to and
including <|end|>), then appends `observation_ids(...)` for the tool/user messages that follow
and the next generation prompt. When thinking is preserved (or within one turn in dropped mode)
this stream equals `render_ids` of the whole conversation token for token, provided the sampled
ids are the tokenizer's own encoding of the sampled text. They differ (by design) when:
- thinking is dropped and a new user message starts a turn: a re-render removes the earlier
  turns' reasoning and masks those turns, while the TITO stream keeps what was sampled;
- the model sampled a non-canonical tokenization of its text (TITO keeps the sampled ids).
A simplification: per-span tokenization assumes a byte-level tokenizer that adds no prefix
space to each call (GPT-2 / Qwen / Llama-3 style); SentencePiece tokenizers that prepend "▁"
to every piece would add spaces at span boundaries.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from arcforge.chat.template import (
    Span,
    ThinkingConfig,
    generation_prompt,
    plain_spans,
    render,
    turn_thinking,
)
from arcforge.types import Message, Tool


@dataclass
class Encoded:
    """input_ids and loss_mask are (L,); text is the rendered string they encode."""

    input_ids: list[int]
    loss_mask: list[int]
    text: str


# transformers applies `split_special_tokens` by setting it on the (shared) tokenizer for the
# call, so two threads encoding at once can see each other's setting and garble special
# tokens (measured: 5 in 3000 encodings with 3 threads). One lock per process serializes it.
_TOKENIZE_LOCK = threading.Lock()


def encode_spans(spans: list[Span], tokenizer: Any) -> list[list[int]]:
    """Token ids of each span, tokenized separately (two batched tokenizer calls)."""
    out: list[list[int]] = [[] for _ in spans]
    for literal in (False, True):
        idx = [i for i, s in enumerate(spans) if s.literal == literal and s.text]
        if not idx:
            continue
        with _TOKENIZE_LOCK:
            batch = tokenizer(
                [spans[i].text for i in idx],
                add_special_tokens=False,
                split_special_tokens=literal,
            )["input_ids"]
        for i, ids in zip(idx, batch):
            out[i] = list(ids)
    return out


def encode(spans: list[Span], tokenizer: Any) -> Encoded:
    """Tokenize spans into ids and a loss mask (1 on every token of a trainable span).

    Args:
        spans: from `render`.
        tokenizer: a transformers fast tokenizer holding the chat special tokens.

    Returns:
        Encoded(input_ids, loss_mask, text).
    """
    ids: list[int] = []
    mask: list[int] = []
    for span, span_ids in zip(spans, encode_spans(spans, tokenizer)):
        ids += span_ids
        mask += [int(span.trainable)] * len(span_ids)
    return Encoded(ids, mask, "".join(s.text for s in spans))


def render_ids(
    messages: list[Message],
    tokenizer: Any,
    tools: list[Tool] | None = None,
    thinking: ThinkingConfig = ThinkingConfig(),
    add_generation_prompt: bool = False,
) -> Encoded:
    """`encode(render(...), tokenizer)`: a conversation straight to ids and loss mask.

    A tokenizer carrying the native format (arcforge.chat.formats) renders through the
    checkpoint's own template instead; `thinking` is then the template's business
    (`chat.template_kwargs`)."""
    fmt = getattr(tokenizer, "arcforge_chat_format", None)
    if fmt is not None and fmt.name == "native":
        return fmt.encode(messages, tools, add_generation_prompt)
    return encode(render(messages, tools, thinking, add_generation_prompt), tokenizer)


def observation_spans(
    messages_after_assistant: list[Message],
    thinking: ThinkingConfig = ThinkingConfig(),
    next_turn_thinking: bool | None = None,
) -> list[Span]:
    """The spans `observation_ids` encodes (all untrained)."""
    spans = [Span("\n", False, "assistant", "template")]
    user: Message | None = None
    for m in messages_after_assistant:
        if m.role == "assistant":
            raise ValueError(
                "observation_ids takes the tool/user messages after an assistant turn; "
                "append the sampled assistant tokens themselves instead of re-rendering them"
            )
        spans += plain_spans(m)
        if m.role == "user":
            user = m
    think = turn_thinking(user, thinking) if next_turn_thinking is None else next_turn_thinking
    return spans + generation_prompt(think)


def observation_ids(
    messages_after_assistant: list[Message],
    tokenizer: Any,
    thinking: ThinkingConfig = ThinkingConfig(),
    next_turn_thinking: bool | None = None,
) -> list[int]:
    """Template and observation tokens that follow a sampled assistant turn's <|end|>.

    Args:
        messages_after_assistant: the tool results and/or user messages, in order.
        tokenizer: the tokenizer the prompt was encoded with.
        thinking: the config; only `enabled` matters here (the default switch).
        next_turn_thinking: whether the next assistant reply thinks. None: the last user
            message's `thinking` among `messages_after_assistant` if set, else
            `thinking.enabled`. When only tool results follow, pass the current turn's setting.

    Returns:
        ids of "\\n", each message's block, and the next generation prompt (with the empty
        think block when thinking is off). None of them are trained.
    """
    spans = observation_spans(messages_after_assistant, thinking, next_turn_thinking)
    return encode(spans, tokenizer).input_ids
