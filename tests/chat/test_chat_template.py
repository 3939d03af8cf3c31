"""The rendered text and its loss mask for every thinking mode, written out in full.

In the expected strings, trained text is wrapped in [[ ]]; everything else is context only.
Each case is checked twice: on the spans (`render`) and on the tokens (`render_ids`, where the
trained token runs are decoded back), so the mask is exact at the token level too.
"""

from arcforge.chat import ThinkingConfig, render, render_ids, turn_prefixes
from arcforge.types import Message, Tool, ToolCall


def marked_spans(spans) -> str:
    return "".join(f"[[{s.text}]]" if s.trainable else s.text for s in spans)


def marked_tokens(enc, tokenizer) -> str:
    """Decode runs of equal mask value, wrapping trained runs in [[ ]]."""
    out, run, flag = [], [], None
    for tid, m in list(zip(enc.input_ids, enc.loss_mask)) + [(None, None)]:
        if m != flag and run:
            text = tokenizer.decode(run)
            out.append(f"[[{text}]]" if flag else text)
            run = []
        run.append(tid)
        flag = m
    return "".join(out)


def check(messages, tokenizer, expected, **kw) -> None:
    spans = render(messages, **kw)
    # adjacent trained spans are shown as one run at token level
    assert marked_spans(spans).replace("]][[", "") == expected
    assert marked_tokens(render_ids(messages, tokenizer, **kw), tokenizer) == expected


def conversation(u1_thinking=None, u2_thinking=None, a2_train=True) -> list[Message]:
    return [
        Message("system", "Be brief."),
        Message("user", "What is 2+3?", thinking=u1_thinking),
        Message("assistant", "", reasoning="need add", tool_calls=[ToolCall("add", {"a": 2})]),
        Message("tool", "5"),
        Message("assistant", "5", reasoning="got 5", train=a2_train),
        Message("user", "Thanks", thinking=u2_thinking),
        Message("assistant", "Welcome.", reasoning="polite"),
    ]


HEAD = "<|system|>\nBe brief.<|end|>\n<|user|>\nWhat is 2+3?<|end|>\n"
CALL = '<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'


def test_dropped_thinking_default_drops_and_masks_earlier_turns(tokenizer):
    # Turn 1 (before the last user message): no think block, not trained.
    # Turn 2: interleaved thinking kept and trained, including <|end|>.
    expected = (
        HEAD + f"<|assistant|>\n{CALL}<|end|>\n<|tool|>\n5<|end|>\n<|assistant|>\n5<|end|>\n"
        "<|user|>\nThanks<|end|>\n"
        "<|assistant|>\n[[<think>\npolite\n</think>\nWelcome.<|end|>]]\n"
    )
    check(conversation(), tokenizer, expected)


def test_preserved_thinking_keeps_and_trains_every_turn(tokenizer):
    expected = (
        HEAD + f"<|assistant|>\n[[<think>\nneed add\n</think>\n{CALL}<|end|>]]\n"
        "<|tool|>\n5<|end|>\n"
        "<|assistant|>\n[[<think>\ngot 5\n</think>\n5<|end|>]]\n"
        "<|user|>\nThanks<|end|>\n"
        "<|assistant|>\n[[<think>\npolite\n</think>\nWelcome.<|end|>]]\n"
    )
    check(conversation(), tokenizer, expected, thinking=ThinkingConfig(preserve=True))


def test_interleaved_thinking_within_the_current_turn_in_dropped_mode(tokenizer):
    # One turn only: both the tool-calling step and the reply keep their think blocks.
    expected = (
        HEAD + f"<|assistant|>\n[[<think>\nneed add\n</think>\n{CALL}<|end|>]]\n"
        "<|tool|>\n5<|end|>\n"
        "<|assistant|>\n[[<think>\ngot 5\n</think>\n5<|end|>]]\n"
    )
    check(conversation()[:5], tokenizer, expected)


def test_turn_level_off_gives_untrained_empty_block_and_trained_answer(tokenizer):
    # The last turn's user switches thinking off: its reasoning is not rendered; the empty
    # block is template (the generation prompt holds it), the answer and <|end|> are trained.
    expected = (
        HEAD + f"<|assistant|>\n{CALL}<|end|>\n<|tool|>\n5<|end|>\n<|assistant|>\n5<|end|>\n"
        "<|user|>\nThanks<|end|>\n"
        "<|assistant|>\n<think>\n\n</think>\n[[Welcome.<|end|>]]\n"
    )
    check(conversation(u2_thinking=False), tokenizer, expected)


def test_turn_level_switches_per_turn_with_preserved_thinking(tokenizer):
    # Turn 1 off (both of its assistant steps), turn 2 forced on over a default of off.
    expected = (
        HEAD + f"<|assistant|>\n<think>\n\n</think>\n[[{CALL}<|end|>]]\n"
        "<|tool|>\n5<|end|>\n"
        "<|assistant|>\n<think>\n\n</think>\n[[5<|end|>]]\n"
        "<|user|>\nThanks<|end|>\n"
        "<|assistant|>\n[[<think>\npolite\n</think>\nWelcome.<|end|>]]\n"
    )
    msgs = conversation(u1_thinking=False, u2_thinking=True)
    check(msgs, tokenizer, expected, thinking=ThinkingConfig(enabled=False, preserve=True))


def test_config_disabled_applies_to_turns_without_a_switch(tokenizer):
    expected = "<|user|>\nHi<|end|>\n<|assistant|>\n<think>\n\n</think>\n[[Hello.<|end|>]]\n"
    msgs = [Message("user", "Hi"), Message("assistant", "Hello.", reasoning="ignored")]
    check(msgs, tokenizer, expected, thinking=ThinkingConfig(enabled=False))


def test_thinking_on_without_reasoning_trains_an_empty_block(tokenizer):
    expected = "<|user|>\nHi<|end|>\n<|assistant|>\n[[<think>\n\n</think>\nHello.<|end|>]]\n"
    check([Message("user", "Hi"), Message("assistant", "Hello.")], tokenizer, expected)


def test_train_false_message_stays_in_context_but_is_masked(tokenizer):
    expected = (
        HEAD + f"<|assistant|>\n[[<think>\nneed add\n</think>\n{CALL}<|end|>]]\n"
        "<|tool|>\n5<|end|>\n"
        "<|assistant|>\n<think>\ngot 5\n</think>\n5<|end|>\n"
        "<|user|>\nThanks<|end|>\n"
        "<|assistant|>\n[[<think>\npolite\n</think>\nWelcome.<|end|>]]\n"
    )
    msgs = conversation(a2_train=False)
    check(msgs, tokenizer, expected, thinking=ThinkingConfig(preserve=True))


def test_generation_prompt_with_thinking_on_and_off(tokenizer):
    on = [Message("user", "Hi")]
    check(on, tokenizer, "<|user|>\nHi<|end|>\n<|assistant|>\n", add_generation_prompt=True)
    off = [Message("user", "Hi", thinking=False)]
    expected = "<|user|>\nHi<|end|>\n<|assistant|>\n<think>\n\n</think>\n"
    check(off, tokenizer, expected, add_generation_prompt=True)


def _weather(city: str, days: int = 1) -> str:
    """Get the forecast.

    Args:
        city: the city name
        days: how many days
    """
    return ""


TOOL_LINE = (
    '{"type": "function", "function": {"name": "_weather", "description": "Get the forecast.", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string", "description": '
    '"the city name"}, "days": {"type": "integer", "description": "how many days"}}, '
    '"required": ["city"]}}}\n'
)
INSTRUCTION = (
    'To call a tool, write <tool_call>{"name": "<tool name>", "arguments": {<arguments as a JSON '
    "object>}}</tool_call>; one reply may hold several calls."
)


def test_tools_create_a_system_block_when_there_is_none(tokenizer):
    tools = [Tool.from_function(_weather)]
    expected = (
        f"<|system|>\n# Tools\n{TOOL_LINE}{INSTRUCTION}<|end|>\n<|user|>\nRain?<|end|>\n"
        "<|assistant|>\n"
    )
    msgs = [Message("user", "Rain?")]
    check(msgs, tokenizer, expected, tools=tools, add_generation_prompt=True)


def test_tools_are_appended_to_an_existing_system_message(tokenizer):
    tools = [Tool.from_function(_weather)]
    expected = f"<|system|>\nBe brief.\n\n# Tools\n{TOOL_LINE}{INSTRUCTION}<|end|>\n"
    check([Message("system", "Be brief.")], tokenizer, expected, tools=tools)


def test_turn_prefixes_train_each_turn_once_in_dropped_mode():
    msgs = conversation()
    prefixes = turn_prefixes(msgs)
    assert [len(p) for p in prefixes] == [5, 7]
    trained = [
        "".join(s.text for s in render(p) if s.trainable and s.kind == "reasoning")
        for p in prefixes
    ]
    assert trained == [
        "<think>\nneed add\n</think>\n<think>\ngot 5\n</think>\n",
        "<think>\npolite\n</think>\n",
    ]


def test_a_tool_schema_renders_the_same_after_a_sorted_json_round_trip():
    import json

    from arcforge.chat.template import tool_line

    params = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file"},
            "old": {"type": "string"},
            "new": {"type": "string"},
            "count": {"type": "integer"},
        },
        "required": ["path", "old", "new"],
    }
    tool = Tool("edit_file", "Replace text.", params)
    back = json.loads(json.dumps(tool.schema()["function"], sort_keys=True))
    again = Tool(back["name"], back["description"], back["parameters"])
    assert tool_line(again) == tool_line(tool)
    # one order: type, name, description, parameters; required parameters first, in order
    assert tool_line(tool) == (
        '{"type": "function", "function": {"name": "edit_file", "description": "Replace text.", '
        '"parameters": {"type": "object", "properties": {"path": {"type": "string", '
        '"description": "file"}, "old": {"type": "string"}, "new": {"type": "string"}, '
        '"count": {"type": "integer"}}, "required": ["path", "old", "new"]}}}'
    )
