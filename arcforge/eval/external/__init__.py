"""External benchmarks, scored by their own code: `bfcl:<category>`, `reasoning_gym:<dataset>`,
`tasks:<dir>`, `swebench:<file.jsonl>`.

A suite is named like a data source, with an optional random draw: `bfcl:simple_python`,
`bfcl:multi_turn_base?n=50&seed=1`. Each prefix is registered by the module that implements it
(`register`); `open_suite(name)` parses the name and builds the suite. A suite asks a
`Responder` for each assistant turn: a callable from OpenAI-shaped messages and tools to one
OpenAI-shaped assistant message (`{"content", "tool_calls", "reasoning_content"}`), so the
same suite scores an in-process checkpoint in its native chat format and any OpenAI-compatible
endpoint (vLLM, SGLang, `arcforge serve`).
"""

from __future__ import annotations

from arcforge.eval.external.base import (
    ExternalSuite,
    ItemResult,
    Responder,
    SuiteResult,
    SuiteSpec,
    known_prefixes,
    open_suite,
    parse_spec,
    register,
)

__all__ = [
    "ExternalSuite",
    "ItemResult",
    "Responder",
    "SuiteResult",
    "SuiteSpec",
    "known_prefixes",
    "open_suite",
    "parse_spec",
    "register",
]
