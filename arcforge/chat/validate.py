"""Check a parsed tool call against the tools on offer, before running it.

`validate_call` returns an error message the agent loop can show the model (unknown tool with
the list of available ones, missing required arguments, unexpected arguments, wrong types,
values outside an enum) or None when the call is well formed. It implements the part of JSON
Schema that `Tool.from_function` emits: type (string, integer, number, boolean, array, object,
null, or a list of these), enum, required, properties, items and additionalProperties.
Combinators (anyOf, oneOf, ...) are not checked.
"""

from __future__ import annotations

from typing import Any

from arcforge.chat.parse import json_type_name
from arcforge.types import Tool, ToolCall


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        is_int = isinstance(value, int) and not isinstance(value, bool)
        return is_int or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = {
        "string": str,
        "boolean": bool,
        "array": list,
        "object": dict,
        "null": type(None),
    }.get(name)
    return expected is None or isinstance(value, expected)


def _check_value(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Problems with one value against its schema; `path` names it (e.g. `files[0].name`)."""
    if "enum" in schema and value not in schema["enum"]:
        return [f'argument "{path}" must be one of {schema["enum"]}, got {value!r}']
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is_type(value, t) for t in names):
            want = " or ".join(names)
            got = json_type_name(value)
            return [f'argument "{path}" must be {want}, got {got} {_short(value)}']
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        problems = []
        for i, item in enumerate(value):
            problems += _check_value(item, schema["items"], f"{path}[{i}]")
        return problems
    if isinstance(value, dict) and ("properties" in schema or "required" in schema):
        return _check_object(value, schema, prefix=f"{path}.")
    return []


def _check_object(args: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> list[str]:
    """Required, unexpected and per-property problems of an object's members."""
    props: dict[str, Any] = schema.get("properties") or {}
    problems = [
        f'missing required argument "{prefix}{k}"'
        for k in schema.get("required", [])
        if k not in args
    ]
    if not schema.get("additionalProperties", False):
        extra = [k for k in args if k not in props]
        if extra:
            names = ", ".join(f'"{prefix}{k}"' for k in extra)
            allowed = ", ".join(props) or "none"
            problems.append(f"unexpected argument(s) {names} (allowed: {allowed})")
    for key, value in args.items():
        if key in props and isinstance(props[key], dict):
            problems += _check_value(value, props[key], f"{prefix}{key}")
    return problems


def _short(value: Any, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def validate_call(call: ToolCall, tools: dict[str, Tool]) -> str | None:
    """Check `call` against the schema of the tool it names.

    Unexpected arguments are rejected unless the schema sets `additionalProperties` (a Python
    tool function would fail on them).

    Args:
        call: a parsed call.
        tools: the tools on offer, by name.

    Returns:
        None when the call is valid, else one message naming the tool and every problem.
    """
    tool = tools.get(call.name)
    if tool is None:
        available = ", ".join(sorted(tools)) or "none"
        return f'unknown tool "{call.name}"; available tools: {available}'
    problems = _check_object(call.arguments, tool.parameters or {})
    if problems:
        return f'invalid call to "{call.name}": ' + "; ".join(problems)
    return None
