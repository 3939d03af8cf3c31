"""The Jinja chat_template a checkpoint carries equals `chat.render`, through transformers.

A tiny model is saved with `save_checkpoint`, its tokenizer is loaded back with
`AutoTokenizer.from_pretrained`, and `apply_chat_template` must give our renderer's text, token
ids and loss mask (`assistant_masks`, from the template's {% generation %} blocks) for every
thinking mode and for tool calls and tool results, with OpenAI-shaped messages.
"""

import json

import pytest
from tiny_models import micro_llama_config
from transformers import AutoTokenizer, LlamaForCausalLM

from arcforge.chat import ThinkingConfig, render, render_ids
from arcforge.chat.jinja import CHAT_TEMPLATE
from arcforge.model.checkpoint import save_checkpoint
from arcforge.types import Message, Tool, ToolCall

# Keys deliberately out of canonical order: the template must reorder them as tool_line does.
WEATHER = Tool(
    "weather",
    "Weather for a city.",
    {
        "required": ["unit", "city"],
        "properties": {
            "zone": {"description": "optional", "type": "string"},
            "city": {"type": "string", "description": "City name"},
            "unit": {"enum": ["C", "F"], "type": "string"},
        },
        "type": "object",
    },
)
ADD = Tool("add", "Add two numbers.", {"type": "object", "properties": {"a": {"type": "integer"}}})


def conversation(u1=None, u2=None, a2_train=True, system=True) -> list[Message]:
    head = [Message("system", "Be brief.")] if system else []
    return head + [
        Message("user", "What is 2+3? And the weather in Paris?", thinking=u1),
        Message(
            "assistant",
            "Let me check.",
            reasoning="need add",
            tool_calls=[ToolCall("add", {"a": 2, "b": 3}), ToolCall("weather", {"city": "Paris"})],
        ),
        Message("tool", "5", tool_call_id="c0"),
        Message("tool", "sunny, 21 degrees", tool_call_id="c1"),
        Message("assistant", "5, and sunny.", reasoning="got both", train=a2_train),
        Message("user", "Thanks", thinking=u2),
        Message("assistant", "Welcome.", reasoning="polite"),
    ]


def openai_shape(m: Message) -> dict:
    """The message as an OpenAI client sends it: our dict with `reasoning` sent as
    reasoning_content and tool calls with ids and JSON-string arguments."""
    d = m.to_dict()
    if "reasoning" in d:
        d["reasoning_content"] = d.pop("reasoning")
    if m.tool_calls:
        d["content"] = m.content or None
        d["tool_calls"] = [
            {
                "id": f"c{j}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for j, c in enumerate(m.tool_calls)
        ]
    return d


@pytest.fixture(scope="module")
def hf_tokenizer(tokenizer, tmp_path_factory):
    model = LlamaForCausalLM(micro_llama_config(len(tokenizer), num_hidden_layers=1))
    out = save_checkpoint(model, tokenizer, tmp_path_factory.mktemp("ckpt") / "c")
    assert (out / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == CHAT_TEMPLATE
    return AutoTokenizer.from_pretrained(str(out))


CASES = {
    "dropped": (conversation(), ThinkingConfig()),
    "preserved": (conversation(), ThinkingConfig(preserve=True)),
    "off": (conversation(), ThinkingConfig(enabled=False)),
    "turn_switch_off_then_on": (conversation(u1=False, u2=True), ThinkingConfig()),
    "turn_switch_on_default_off": (conversation(u1=True), ThinkingConfig(enabled=False)),
    "masked_reply_preserved": (conversation(a2_train=False), ThinkingConfig(preserve=True)),
    "tools_without_system": (conversation(system=False), ThinkingConfig()),
    "single_turn": (conversation()[:6], ThinkingConfig()),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("with_tools", [True, False])
@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_apply_chat_template_equals_render(hf_tokenizer, name, with_tools, add_generation_prompt):
    messages, thinking = CASES[name]
    if add_generation_prompt:
        messages = messages[:-1]  # the prompt for the final reply
    tools = [ADD, WEATHER] if with_tools else None
    ours = render_ids(messages, hf_tokenizer, tools, thinking, add_generation_prompt)
    kw = {
        "tools": [t.schema() for t in tools] if tools else None,
        "add_generation_prompt": add_generation_prompt,
        "enable_thinking": thinking.enabled,
        "preserve_thinking": thinking.preserve,
    }
    chat = [openai_shape(m) for m in messages]
    text = hf_tokenizer.apply_chat_template(chat, tokenize=False, **kw)
    assert text == ours.text
    enc = hf_tokenizer.apply_chat_template(
        chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kw
    )
    assert list(enc["input_ids"]) == ours.input_ids
    assert list(enc["assistant_masks"]) == ours.loss_mask
    assert sum(ours.loss_mask) > 0 or add_generation_prompt or name == "off"


def test_template_reads_message_dataclasses_and_flat_calls(hf_tokenizer):
    # transformers turns dataclasses into dicts, so our Message (flat {name, arguments} calls,
    # `reasoning`) renders as is; defaults follow ThinkingConfig() with no kwargs.
    messages = conversation()
    text = hf_tokenizer.apply_chat_template(messages, tools=[WEATHER.schema()], tokenize=False)
    assert text == "".join(s.text for s in render(messages, [WEATHER]))
    assert text.count("<think>") == 1  # dropped mode: only the last turn keeps its reasoning


def test_schema_keys_in_canonical_order(hf_tokenizer):
    text = hf_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tools=[WEATHER.schema()], tokenize=False
    )
    line = next(x for x in text.splitlines() if x.startswith('{"type": "function"'))
    params = json.loads(line)["function"]["parameters"]
    assert list(params) == ["type", "properties", "required"]
    assert list(params["properties"]) == ["unit", "city", "zone"]  # required first, then sorted
    assert list(params["properties"]["zone"]) == ["type", "description"]


def test_unknown_role_is_a_template_error(hf_tokenizer):
    with pytest.raises(Exception, match="unknown role 'wizard'|unknown role wizard"):
        hf_tokenizer.apply_chat_template([{"role": "wizard", "content": "x"}], tokenize=False)
