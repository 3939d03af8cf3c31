"""The chat template as a Jinja string, saved with every checkpoint as its `chat_template`.

`CHAT_TEMPLATE` renders exactly what `arcforge.chat.render` renders, so
`tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=...)` and any server
that renders through it (vLLM, SGLang, transformers pipelines) produce the prompts the model
was trained on. Messages are OpenAI-shaped dicts (or arcforge `Message`s):
- `reasoning_content` (or `reasoning`) is the think block; `tool_calls` are OpenAI
  `{"type": "function", "function": {"name", "arguments"}}` or flat `{"name", "arguments"}`;
- a user message's boolean `thinking` is the turn-level switch; `train: false` masks an
  assistant message.
Template kwargs map to `ThinkingConfig`: `enable_thinking` (default true) and
`preserve_thinking` (default false). Trainable assistant text sits inside
`{% generation %}` blocks, so `return_assistant_tokens_mask=True` gives the loss mask.

Tool schemas are written with their keys in `canonical_schema`'s order by a recursive macro,
because Jinja's `tojson` keeps the caller's key order.

Simplifications: a tool call whose `arguments` is a JSON string is inserted as written (the
Python side re-serialises it), so only a `json.dumps`-shaped string renders identically; and
text is rendered as one string, so a special-token string inside user or tool text becomes
that special token when the result is tokenized (`render_ids` keeps it literal).
"""

from __future__ import annotations

import json

from arcforge.chat.template import SCHEMA_KEY_ORDER, TOOLS_HEADER, TOOLS_INSTRUCTION
from arcforge.chat.tokens import (
    ASSISTANT,
    CALL_CLOSE,
    CALL_OPEN,
    END,
    SYSTEM,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL,
    USER,
)

# Every tag strips the whitespace around it (`{%-`, `{{-`), so the layout below is free and
# all output text comes from expressions.
_TEMPLATE = r"""
{#- arcforge's chat format (arcforge.chat.template renders the same text). Kwargs:
    enable_thinking (default true), preserve_thinking (default false); a user message's boolean
    `thinking` switches thinking for its turn; `train: false` masks an assistant message. -#}
{%- set KEY_ORDER = __KEY_ORDER__ -%}
{%- macro canon(v) -%}
  {%- if v is mapping -%}
    {%- set known = KEY_ORDER | select("in", v | list) | list -%}
    {%- set rest = v | list | reject("in", KEY_ORDER) | sort(case_sensitive=true) | list -%}
    {{- "{" -}}
    {%- for k in known + rest -%}
      {{- ", " if not loop.first else "" -}}
      {%- if k == "properties" and v[k] is mapping -%}
        {%- set props = v[k] -%}
        {%- set req = v.required if v.required is iterable and v.required is not string else [] -%}
        {%- set first = req | select("string") | select("in", props | list)
            | unique(case_sensitive=true) | list -%}
        {%- set names = first + (props | list | reject("in", first)
            | sort(case_sensitive=true) | list) -%}
        {{- k | tojson ~ ": {" -}}
        {%- for n in names -%}
          {{- ", " if not loop.first else "" -}}
          {{- n | tojson ~ ": " ~ canon(props[n]) -}}
        {%- endfor -%}
        {{- "}" -}}
      {%- else -%}
        {{- k | tojson ~ ": " ~ canon(v[k]) -}}
      {%- endif -%}
    {%- endfor -%}
    {{- "}" -}}
  {%- elif v is string or v is not iterable -%}
    {{- v | tojson -}}
  {%- else -%}
    {{- "[" -}}
    {%- for x in v -%}
      {{- ", " if not loop.first else "" -}}
      {{- canon(x) -}}
    {%- endfor -%}
    {{- "]" -}}
  {%- endif -%}
{%- endmacro -%}
{%- macro text(c) -%}
  {%- if c is string -%}
    {{- c -}}
  {%- elif c is iterable and c is not mapping -%}
    {%- for p in c -%}
      {{- p.text if p is mapping and p.text is string else "" -}}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
{%- macro system_block(content) -%}
  {{- "__SYSTEM__\n" ~ content -}}
  {%- if tools -%}
    {{- ("\n\n" if content else "") ~ __TOOLS_HEADER__ -}}
    {%- for t in tools -%}
      {%- set fn = t.function if t.function is mapping else t -%}
      {%- set params = fn.parameters if fn.parameters else {"type": "object", "properties": {}} -%}
      {{- '{"type": "function", "function": {"name": ' ~ (fn.name | tojson)
          ~ ', "description": ' ~ (fn.description if fn.description is defined else "") | tojson
          ~ ', "parameters": ' ~ canon(params) ~ '}}\n' -}}
    {%- endfor -%}
    {{- __TOOLS_INSTRUCTION__ -}}
  {%- endif -%}
  {{- "__END__\n" -}}
{%- endmacro -%}
{%- macro call_json(c) -%}
  {%- set fn = c.function if c.function is mapping else c -%}
  {%- set args = fn.arguments if fn.arguments is defined and fn.arguments is not none else {} -%}
  {%- if args is string -%}
    {%- set args_json = args if args | trim else "{}" -%}
  {%- else -%}
    {%- set args_json = args | tojson -%}
  {%- endif -%}
  {{- '{"name": ' ~ (fn.name | tojson) ~ ', "arguments": ' ~ args_json ~ "}" -}}
{%- endmacro -%}
{%- set think_default = enable_thinking if enable_thinking is boolean else true -%}
{%- set preserve = preserve_thinking if preserve_thinking is boolean else false -%}
{%- set ns = namespace(last_user=-1, think=think_default) -%}
{%- for m in messages -%}
  {%- if m.role == "user" -%}
    {%- set ns.last_user = loop.index0 -%}
  {%- endif -%}
{%- endfor -%}
{%- set has_system = messages and messages[0].role == "system" -%}
{%- if tools and not has_system -%}
  {{- system_block("") -}}
{%- endif -%}
{%- for m in messages -%}
  {%- set content = text(m.content) -%}
  {%- if m.role == "user" -%}
    {%- set ns.think = m.thinking if m.thinking is boolean else think_default -%}
  {%- endif -%}
  {%- if m.role == "assistant" -%}
    {%- set drop = not preserve and loop.index0 < ns.last_user -%}
    {%- set train = m.train is not defined or m.train is none or m.train -%}
    {{- "__ASSISTANT__\n" -}}
    {%- if not drop and not ns.think -%}
      {{- "__THINK_OPEN__\n\n__THINK_CLOSE__\n" -}}
    {%- endif -%}
    {%- set reasoning = m.reasoning_content if m.reasoning_content is string else "" -%}
    {%- set body -%}
      {%- if not drop and ns.think -%}
        {{- "__THINK_OPEN__\n" ~ reasoning ~ "\n__THINK_CLOSE__\n" -}}
      {%- endif -%}
      {{- content -}}
      {%- for c in m.tool_calls or [] -%}
        {{- "__CALL_OPEN__" ~ call_json(c) ~ "__CALL_CLOSE__" -}}
      {%- endfor -%}
      {{- "__END__" -}}
    {%- endset -%}
    {%- if train and not drop -%}
      {%- generation -%}
        {{- body -}}
      {%- endgeneration -%}
    {%- else -%}
      {{- body -}}
    {%- endif -%}
    {{- "\n" -}}
  {%- elif loop.first and has_system -%}
    {{- system_block(content) -}}
  {%- elif m.role in ["system", "user", "tool"] -%}
    {%- set header = {"system": "__SYSTEM__", "user": "__USER__", "tool": "__TOOL__"}[m.role] -%}
    {{- header ~ "\n" ~ content ~ "__END__\n" -}}
  {%- else -%}
    {{- raise_exception("message " ~ loop.index0 ~ ": unknown role " ~ m.role
        ~ " (system|user|assistant|tool)") -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- "__ASSISTANT__\n" -}}
  {%- if not ns.think -%}
    {{- "__THINK_OPEN__\n\n__THINK_CLOSE__\n" -}}
  {%- endif -%}
{%- endif -%}
"""


def _build() -> str:
    """Fill the token strings and fixed texts into the template source."""

    values = {
        "__KEY_ORDER__": json.dumps(list(SCHEMA_KEY_ORDER)),
        "__TOOLS_HEADER__": json.dumps(TOOLS_HEADER),
        "__TOOLS_INSTRUCTION__": json.dumps(TOOLS_INSTRUCTION),
        "__SYSTEM__": SYSTEM,
        "__USER__": USER,
        "__ASSISTANT__": ASSISTANT,
        "__TOOL__": TOOL,
        "__END__": END,
        "__THINK_OPEN__": THINK_OPEN,
        "__THINK_CLOSE__": THINK_CLOSE,
        "__CALL_OPEN__": CALL_OPEN,
        "__CALL_CLOSE__": CALL_CLOSE,
    }
    out = _TEMPLATE.strip()
    for key, value in values.items():
        out = out.replace(key, value)
    return out


CHAT_TEMPLATE = _build()
