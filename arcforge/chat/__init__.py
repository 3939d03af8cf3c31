"""Message <-> token rendering: the chat template (and its Jinja twin), thinking modes, loss
masks and parsing."""

from arcforge.chat.encoding import (
    Encoded,
    encode,
    encode_spans,
    observation_ids,
    observation_spans,
    render_ids,
)
from arcforge.chat.jinja import CHAT_TEMPLATE
from arcforge.chat.parse import (
    ParsedAssistant,
    parse_assistant,
    parse_openai_message,
    parse_openai_tool_calls,
    to_message,
)
from arcforge.chat.template import (
    EMPTY_THINK,
    Span,
    ThinkingConfig,
    generation_prompt,
    render,
    turn_prefixes,
)
from arcforge.chat.validate import validate_call

__all__ = [
    "CHAT_TEMPLATE",
    "EMPTY_THINK",
    "Encoded",
    "ParsedAssistant",
    "Span",
    "ThinkingConfig",
    "encode",
    "encode_spans",
    "generation_prompt",
    "observation_ids",
    "observation_spans",
    "parse_assistant",
    "parse_openai_message",
    "parse_openai_tool_calls",
    "render",
    "render_ids",
    "to_message",
    "turn_prefixes",
    "validate_call",
]
