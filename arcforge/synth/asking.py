"""`ask_json`: one JSON value from an LLM, telling a model's mistake from an endpoint failure.

`LLMClient.chat_json` raises LLMError both when the endpoint fails and when the model never
writes parsable JSON. Synthesis must treat the two differently: an unusable reply drops one
record (its reason counted), a dead endpoint stops the run. So here an endpoint failure stays
an LLMError (raised by `LLMClient.chat` after its retries) and an unparsable reply, after
`repairs` repair turns with the parse error appended, is a ValueError naming a clip of it.
"""

from __future__ import annotations

from typing import Any

from arcforge.llm import clip, parse_json_loose


def ask_json(client: Any, messages: list[dict], repairs: int = 1, **kw: Any) -> Any:
    """The parsed JSON reply to `messages` (see the module docstring)."""
    convo = list(messages)
    text, err = "", ""
    for _ in range(repairs + 1):
        text = client.chat(convo, **{**kw, "n": 1})[0]
        try:
            return parse_json_loose(text)
        except ValueError as e:
            err = str(e)
        convo = [
            *convo,
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"Your reply could not be parsed as JSON ({err}). "
                "Reply again with only the JSON value.",
            },
        ]
    raise ValueError(f"no parsable JSON after {repairs + 1} replies ({err}); last: {clip(text)}")
