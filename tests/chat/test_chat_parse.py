"""Parsing sampled replies and OpenAI messages, and validating calls against tool schemas."""

from typing import Literal

import pytest

from arcforge.chat import (
    ThinkingConfig,
    parse_assistant,
    parse_openai_message,
    parse_openai_tool_calls,
    render,
    to_message,
    validate_call,
)
from arcforge.types import Message, Tool, ToolCall


def test_reasoning_content_and_calls_are_split():
    text = (
        "<think>\nneed add\n</think>\nLet me add."
        '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
        '<tool_call>{"name": "noop"}</tool_call><|end|>ignored'
    )
    p = parse_assistant(text)
    assert p.reasoning == "need add"
    assert p.content == "Let me add."
    assert p.tool_calls == [ToolCall("add", {"a": 2, "b": 3}), ToolCall("noop", {})]
    assert p.errors == [] and p.ok


def test_reply_without_think_block_and_with_prompt_opened_block():
    assert parse_assistant("Hello.<|end|>").reasoning is None
    assert parse_assistant("Hello.<|end|>").content == "Hello."
    # the prompt ended with "<think>\n": the reply only closes the block
    p = parse_assistant("plan\n</think>\nDone.")
    assert (p.reasoning, p.content, p.errors) == ("plan", "Done.", [])


def test_render_of_parsed_reply_reproduces_the_sampled_text():
    sampled = (
        '<think>\nstep 1\nstep 2\n</think>\nOK <tool_call>{"name": "f", "arguments": {"x": [1]}}'
        "</tool_call><|end|>"
    )
    msg = to_message(parse_assistant(sampled))
    spans = render([Message("user", "go"), msg], thinking=ThinkingConfig())
    text = "".join(s.text for s in spans)
    assert text == "<|user|>\ngo<|end|>\n<|assistant|>\n" + sampled + "\n"


@pytest.mark.parametrize(
    "body,error",
    [
        (
            '{"name": "f", "arguments": {"a": }}',
            'tool call 1: invalid JSON (Expecting value at column 34): {"name": "f", "arguments": {"a": }}',
        ),
        (
            '["f", {}]',
            'tool call 1: expected a JSON object {"name": "<tool name>", "arguments": {...}}, got array',
        ),
        ('{"arguments": {}}', 'tool call 1: missing "name"'),
        ('{"name": 3}', 'tool call 1: "name" must be a non-empty string, got 3'),
        (
            '{"name": "f", "arguments": "a=1"}',
            'tool call 1 (f): "arguments" must be a JSON object, got string',
        ),
    ],
)
def test_malformed_calls_become_errors(body, error):
    p = parse_assistant(f"<tool_call>{body}</tool_call>")
    assert p.tool_calls == []
    assert len(p.errors) == 1 and p.errors[0].startswith(error), p.errors


def test_good_calls_survive_next_to_bad_ones_and_unclosed_tags_are_reported():
    text = '<tool_call>{"name": "f", "arguments": {}}</tool_call><tool_call>{"name": "g"'
    p = parse_assistant(text)
    assert p.tool_calls == [ToolCall("f", {})]
    assert p.errors == ['tool call 2: unclosed <tool_call> (no </tool_call>): {"name": "g"']
    p = parse_assistant("<think>\nthinking forever")
    assert (p.reasoning, p.content) == ("thinking forever", "")
    assert p.errors == ["unclosed <think>: the reply ended before </think>"]
    assert parse_assistant("x</tool_call>").errors == [
        "stray </tool_call> without a matching <tool_call>"
    ]


def test_openai_tool_calls():
    msg = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "think",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
        ],
    }
    assert parse_openai_tool_calls(msg) == [ToolCall("f", {"a": 1}, "c1"), ToolCall("g", {}, "c2")]
    p = parse_openai_message(msg)
    assert (p.reasoning, p.content, p.errors) == ("think", "", [])


def test_openai_bad_arguments_and_untouched_tags():
    bad = {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}]}
    p = parse_openai_message(bad)
    assert p.tool_calls == [] and p.errors[0].startswith("tool call 1 (f): arguments are not valid")
    with pytest.raises(ValueError, match="tool call 1 \\(f\\)"):
        parse_openai_tool_calls(bad)
    raw = {"content": '<tool_call>{"name": "f", "arguments": {}}</tool_call>'}
    assert parse_openai_tool_calls(raw) == [ToolCall("f", {})]


def search(query: str, k: int, mode: Literal["fast", "exact"] = "fast", tags: list[str] = ()):
    """Search.

    Args:
        query: text
        k: how many
        mode: speed
        tags: filters
    """


TOOLS = {"search": Tool.from_function(search), "other": Tool("other", "", {"type": "object"})}


@pytest.mark.parametrize(
    "args,error",
    [
        ({"query": "a", "k": 2}, None),
        ({"query": "a", "k": 2.0, "mode": "exact", "tags": ["x"]}, None),
        ({"query": "a"}, 'invalid call to "search": missing required argument "k"'),
        (
            {"query": "a", "k": "2"},
            'invalid call to "search": argument "k" must be integer, got string \'2\'',
        ),
        (
            {"query": "a", "k": True},
            'invalid call to "search": argument "k" must be integer, got boolean True',
        ),
        (
            {"query": "a", "k": 1, "mode": "slow"},
            "invalid call to \"search\": argument \"mode\" must be one of ['fast', 'exact'], got 'slow'",
        ),
        (
            {"query": "a", "k": 1, "tags": ["x", 2]},
            'invalid call to "search": argument "tags[1]" must be string, got integer 2',
        ),
        (
            {"query": 1, "k": 1, "top": 3},
            'invalid call to "search": unexpected argument(s) "top" (allowed: query, k, mode, tags); argument "query" must be string, got integer 1',
        ),
    ],
)
def test_validate_call(args, error):
    assert validate_call(ToolCall("search", args), TOOLS) == error


def test_validate_unknown_tool_lists_the_available_ones():
    err = validate_call(ToolCall("serach", {}), TOOLS)
    assert err == 'unknown tool "serach"; available tools: other, search'
