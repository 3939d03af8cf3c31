"""Scripted policies: Engine implementations that stand in for a model.

- `ScriptedEngine` replies with pre-written assistant messages. It reads the prompt tokens the
  way a model would: the first user message's text picks the script, the number of
  `<|assistant|>` tokens in the prompt is the turn, and a prompt ending in the empty think
  block means thinking is off for this reply. The reply is the template's own rendering of
  the scripted message (think block, content, tool calls, <|end|>) encoded span by span, i.e.
  exactly the ids a perfectly trained model would sample. Logprobs are 0.0 (a dummy).
  `expert_script(task)` writes the expert's messages for math, tool and search tasks from the
  task's oracle data (the reasoning, `metadata["calls"]`, the evidence pages, the answer), so
  scripted experts act in the real environments and their episodes are real (SFT data).
- `GarbageEngine` emits junk: random token ids (special tokens included), random bytes,
  truncated `<tool_call>{` JSON, well-formed calls to unknown tools or with wrong argument
  types, schema-valid calls with junk arguments (so tools really run), unclosed think blocks,
  nonsense answers. For robustness tests: the loop must never
  raise and the reward must stay 0.
Both honour `max_new_tokens` ("length" when cut) and `stop_token_ids`.
"""

from __future__ import annotations

import json
import random
import string
from typing import Any

from arcforge.chat.encoding import encode_spans
from arcforge.chat.template import EMPTY_THINK, assistant_spans
from arcforge.chat.tokens import ASSISTANT, END, USER
from arcforge.rollout.engine import Completion, SamplingParams
from arcforge.types import Message, Task, ToolCall


def _finish(ids: list[int], params: SamplingParams) -> Completion:
    """Cut at the first stop token (kept) or at max_new_tokens, like a real engine; a reply
    without a stop token would run on, so it is "length" either way."""
    stop = next((i for i, t in enumerate(ids) if t in params.stop_token_ids), None)
    if stop is not None and stop < params.max_new_tokens:
        ids, reason = ids[: stop + 1], "stop"
    else:
        ids, reason = ids[: params.max_new_tokens], "length"
    return Completion(ids, [0.0] * len(ids), reason)  # type: ignore[arg-type]


class ScriptedEngine:
    """An Engine replying with `scripts[first user text][turn]` (see the module docstring).

    Args:
        tokenizer: the chat tokenizer.
        scripts: first user message text -> the assistant messages of each turn (the last one
            repeats when the episode runs longer).
        fallback: the reply for a prompt no script matches.
    """

    def __init__(self, tokenizer: Any, scripts: dict[str, list[Message]],
                 fallback: Message | None = None) -> None:  # fmt: skip
        self.tokenizer, self.scripts = tokenizer, scripts
        self.fallback = fallback or Message("assistant", "I do not know.", reasoning="")
        ids = tokenizer.convert_tokens_to_ids
        self._user, self._assistant, self._end = ids(USER), ids(ASSISTANT), ids(END)
        self._empty_think = tokenizer(EMPTY_THINK, add_special_tokens=False)["input_ids"]
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self._version = version

    def _user_text(self, prompt: list[int]) -> str:
        if self._user not in prompt:
            return ""
        u = prompt.index(self._user)
        e = prompt.index(self._end, u) if self._end in prompt[u:] else len(prompt)
        return self.tokenizer.decode(prompt[u + 1 : e]).removeprefix("\n")

    def reply(self, prompt: list[int]) -> list[int]:
        """The token ids of the scripted reply to `prompt` (before stop / length handling)."""
        script = self.scripts.get(self._user_text(prompt)) or [self.fallback]
        turn = max(0, prompt.count(self._assistant) - 1)
        msg = script[min(turn, len(script) - 1)]
        k = len(self._empty_think)
        think = prompt[-k:] != self._empty_think
        spans = assistant_spans(msg, think)[1 if think else 2 : -1]  # no header, no final "\n"
        return [t for ids in encode_spans(spans, self.tokenizer) for t in ids]

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return [_finish(self.reply(p), params) for p in prompts for _ in range(params.n)]


class GarbageEngine:
    """An Engine emitting junk of many kinds (see the module docstring); seeded."""

    KINDS = ("ids", "bytes", "broken_call", "bad_call", "junk_call", "unclosed_think", "nonsense")
    # well-formed calls to the math/tool/search tools with junk string arguments
    JUNK_CALLS = {"lookup": ("entity", "relation"), "calculator": ("expression",),
                  "search": ("query",), "open": ("doc_id",), "answer": ("text",)}  # fmt: skip

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        self.tokenizer, self.rng = tokenizer, random.Random(seed)
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self._version = version

    def _word(self) -> str:
        return "#" + "".join(
            self.rng.choices(string.ascii_letters + "~^", k=self.rng.randint(3, 9))
        )

    def _text(self, kind: str) -> str:
        r = self.rng
        if kind == "bytes":
            return bytes(r.randrange(256) for _ in range(r.randint(1, 60))).decode("latin-1")
        if kind == "broken_call":
            body = json.dumps({"name": r.choice(["lookup", "search", "open"]), "arguments": {}})
            return "<tool_call>" + body[: r.randint(0, len(body) - 1)]
        if kind == "bad_call":
            name = r.choice(["lookup", "calculator", "search", "open", "answer", self._word()])
            args = r.choice([{"entity": 5}, {"page": "x", "doc_id": []}, {"query": None},
                             {"text": {"a": 1}}, {self._word(): 1}, [1, 2]])  # fmt: skip
            return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
        if kind == "junk_call":
            name = r.choice(sorted(self.JUNK_CALLS))
            args = {a: self._word() for a in self.JUNK_CALLS[name]}
            return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
        if kind == "unclosed_think":
            return f"<think>\n{self._word()} {self._word()}"
        return r.choice(["", "Answer: ", "\\boxed{"]) + self._word()  # nonsense

    def _ids(self, max_new: int) -> list[int]:
        kind, r = self.rng.choice(self.KINDS), self.rng
        end = self.tokenizer.convert_tokens_to_ids(END)
        if kind == "ids":  # may hold any special token; ends with <|end|> half of the time
            n = len(self.tokenizer)
            ids = [r.randrange(n) for _ in range(r.randint(1, max_new + 2))]
            return ids + ([end] if r.random() < 0.5 else [])
        ids = self.tokenizer(self._text(kind), add_special_tokens=False)["input_ids"]
        return list(ids) + ([end] if r.random() < 0.9 else [])

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        n = len(prompts) * params.n
        return [_finish(self._ids(params.max_new_tokens), params) for _ in range(n)]


def _note(call: dict[str, Any]) -> str:
    a = call["arguments"]
    if call["name"] == "calculator":
        return f"I need to compute {a['expression']}."
    return f"I need the {a['relation'].replace('_', ' ')} of {a['entity']}."


def _call(name: str, args: dict[str, Any], note: str) -> Message:
    return Message("assistant", "", reasoning=note, tool_calls=[ToolCall(name, args)])


def _search_script(task: Task) -> list[Message]:
    path, pages = task.metadata["path"], task.metadata.get("evidence", [])
    out = []
    for i, (subject, relation, _) in enumerate(path):
        out.append(
            _call(
                "search",
                {"query": subject},
                f"I need the {relation.replace('_', ' ')} of {subject}.",
            )
        )
        if i < len(pages):
            out.append(_call("open", {"doc_id": pages[i]}, f"Reading {pages[i]}."))
    answer = str(task.validation.answer)
    return out + [_call("answer", {"text": answer}, f"The pages show the answer is {answer}.")]


def expert_script(task: Task) -> list[Message]:
    """The scripted expert's assistant messages for a world math, tool or search task.

    Raises:
        ValueError: for other kinds (their experts live with their environments).
    """
    answer = str(task.validation.answer)
    if task.kind == "math":
        reasoning = task.metadata.get("reasoning") or f"The answer is {answer}."
        return [Message("assistant", f"Answer: {answer}", reasoning=reasoning)]
    if task.kind == "tool":
        calls = [_call(c["name"], dict(c["arguments"]), _note(c)) for c in task.metadata["calls"]]
        final = Message("assistant", f"Answer: {answer}",
                        reasoning=f"The tools show the answer is {answer}.")  # fmt: skip
        return calls + [final]
    if task.kind == "search":
        return _search_script(task)
    raise ValueError(f"no scripted expert for task kind {task.kind!r} (math, tool, search)")


def expert_engine(tokenizer: Any, tasks: list[Task]) -> ScriptedEngine:
    """A ScriptedEngine playing the expert on every task in `tasks`."""
    return ScriptedEngine(tokenizer, {t.instruction: expert_script(t) for t in tasks})
