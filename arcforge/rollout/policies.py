"""Scripted policies: Engine implementations that stand in for a model.

- `ScriptedEngine` replies with pre-written assistant messages. It reads the prompt tokens the
  way a model would: the first user message's text picks the script, the number of
  `<|assistant|>` tokens in the prompt is the turn, and a prompt ending in the empty think
  block means thinking is off for this reply. The reply is the template's own rendering of
  the scripted message (think block, content, tool calls, <|end|>) encoded span by span, i.e.
  exactly the ids a perfectly trained model would sample. Logprobs are 0.0 (a dummy).
  `expert_script(task)` writes the expert's messages for every world kind (math, tool, search,
  tir, code, terminal, swe) from the task's oracle data (the reasoning or steps,
  `metadata["calls"]`, the evidence pages, the reference solution, the injected bug and its
  original line), so scripted experts act in the real environments and their episodes are real
  (SFT data, arcforge.synth.episodes). Each kind's expert looks before it acts (runs a check,
  lists or reads the relevant files, views the buggy module) and thinks before every step, the
  way the template demos of arcforge.world.text.demos do. Scripts are written up front: an expert
  never reads its observations, so an episode is kept only when verify() says it worked.
- `GarbageEngine` emits junk: random token ids (special tokens included), random bytes,
  truncated `<tool_call>{` JSON, well-formed calls to unknown tools or with wrong argument
  types, schema-valid calls with junk arguments (so tools really run), unclosed think blocks,
  nonsense answers. For robustness tests: the loop must never
  raise and the reward must stay 0.
Both honour `max_new_tokens` ("length" when cut) and `stop_token_ids`.
"""

from __future__ import annotations

import json
import os
import random
import re
import string
from typing import Any

from arcforge.chat.encoding import encode_spans
from arcforge.chat.template import EMPTY_THINK, assistant_spans
from arcforge.chat.tokens import ASSISTANT, END, USER
from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.types import Message, Task, ToolCall
from arcforge.world.tasks.mathgen import tir_program
from arcforge.world.text.demos import fix_code


def _finish(ids: list[int], params: SamplingParams) -> Completion:
    """Cut at the first stop token (kept) or at max_new_tokens, like a real engine; a reply
    without a stop token would run on, so it is "length" either way."""
    stop = next((i for i, t in enumerate(ids) if t in params.stop_token_ids), None)
    if stop is not None and stop < params.max_new_tokens:
        ids, reason = ids[: stop + 1], "stop"
    else:
        ids, reason = ids[: params.max_new_tokens], "length"
    return Completion(ids, [0.0] * len(ids), reason)  # type: ignore[arg-type]


class _WeightlessEngine:
    """An Engine without weights: `load_weights` only records the policy version it is given."""

    _version = 0

    @property
    def version(self) -> int:
        return self._version

    def load_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self._version = version


class ScriptedEngine(_WeightlessEngine):
    """An Engine replying with `scripts[first user text][turn]` (see the module docstring).

    Args:
        tokenizer: the chat tokenizer.
        scripts: first user message text -> the assistant messages of each turn (the last one
            repeats when the episode runs longer).
        fallback: the reply for a prompt no script matches.
    """

    def __init__(
        self, tokenizer: Any, scripts: dict[str, list[Message]], fallback: Message | None = None
    ) -> None:
        self.tokenizer, self.scripts = tokenizer, scripts
        self.fallback = fallback or Message("assistant", "I do not know.", reasoning="")
        from arcforge.chat.formats import NativeFormat, chat_format

        fmt = chat_format(tokenizer)
        self._native = fmt if isinstance(fmt, NativeFormat) else None
        if self._native is not None:  # the checkpoint's own template: match by rendered text
            # the assistant header: what a generation prompt and a rendered reply share (a
            # generation prompt may also open a thinking block, MiniMax-M2's "<think>")
            user = [Message("user", "x")]
            bare = fmt.render_text(user, None, False)
            start = fmt.render_text(user, None, True)
            full = fmt.render_text([*user, Message("assistant", "y")], None, False)
            self._header = os.path.commonprefix([start, full])[len(bare) :].strip()
            self._stop = fmt.stop_ids()[:1]
            return
        ids = tokenizer.convert_tokens_to_ids
        self._user, self._assistant, self._end = ids(USER), ids(ASSISTANT), ids(END)
        self._empty_think = tokenizer(EMPTY_THINK, add_special_tokens=False)["input_ids"]

    def _native_reply(self, prompt: list[int]) -> list[int]:
        """Native format: the script whose opening text occurs first in the rendered prompt,
        its turn counted by the template's generation prompts so far."""
        text = self.tokenizer.decode(prompt)
        hits = [(text.find(k), -len(k), k) for k in self.scripts if k and k in text]
        script = self.scripts[min(hits)[2]] if hits else [self.fallback]
        turn = max(0, text.count(self._header) - 1) if self._header else 0
        msg = script[min(turn, len(script) - 1)]
        body = self._native.reply_text(msg)
        return self.tokenizer(body, add_special_tokens=False)["input_ids"] + self._stop

    def _user_text(self, prompt: list[int]) -> str:
        if self._user not in prompt:
            return ""
        u = prompt.index(self._user)
        e = prompt.index(self._end, u) if self._end in prompt[u:] else len(prompt)
        return self.tokenizer.decode(prompt[u + 1 : e]).removeprefix("\n")

    def reply(self, prompt: list[int]) -> list[int]:
        """The token ids of the scripted reply to `prompt` (before stop / length handling)."""
        if self._native is not None:
            return self._native_reply(prompt)
        script = self.scripts.get(self._user_text(prompt)) or [self.fallback]
        turn = max(0, prompt.count(self._assistant) - 1)
        msg = script[min(turn, len(script) - 1)]
        k = len(self._empty_think)
        think = prompt[-k:] != self._empty_think
        spans = assistant_spans(msg, think)[1 if think else 2 : -1]  # no header, no final "\n"
        return [t for ids in encode_spans(spans, self.tokenizer) for t in ids]

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return [_finish(self.reply(p), params) for p in prompts for _ in range(params.n)]


class GarbageEngine(_WeightlessEngine):
    """An Engine emitting junk of many kinds (see the module docstring); seeded."""

    KINDS = ("ids", "bytes", "broken_call", "bad_call", "junk_call", "unclosed_think", "nonsense")
    # well-formed calls to the math/tool/search tools with junk string arguments
    JUNK_CALLS = {
        "lookup": ("entity", "relation"),
        "calculator": ("expression",),
        "search": ("query",),
        "open": ("doc_id",),
        "answer": ("text",),
    }

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        self.tokenizer, self.rng = tokenizer, random.Random(seed)

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
            args = r.choice(
                [
                    {"entity": 5},
                    {"page": "x", "doc_id": []},
                    {"query": None},
                    {"text": {"a": 1}},
                    {self._word(): 1},
                    [1, 2],
                ]
            )
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


def search_query(subject: str, relation: str) -> str:
    """The expert's query for one hop: the subject's name, then the relation's label as the
    pages write it ("Ada Lovelace born in")."""
    return f"{subject} {relation.replace('_', ' ')}"


def _search_script(task: Task) -> list[Message]:
    """Per hop: search the subject's name and the relation (`search_query`), whose result 1 is
    the subject's page with the fact as its snippet (SearchIndex.search, `snippet`); the next
    hop searches the object the snippet shows; then answer.

    The fact is read from the snippet rather than from an opened page: a script that copied a
    page id into `open` was never copied by the demo model, and one that opened result 1 left
    it to find and copy the fact from the whole page. docs/experiments.md ("Search") has the
    figures."""
    path = task.metadata["path"]
    out = [
        _call(
            "search",
            {"query": search_query(subject, relation)},
            f"I need the {relation.replace('_', ' ')} of {subject}.",
        )
        for subject, relation, _ in path
    ]
    answer = str(task.validation.answer)
    return out + [_call("answer", {"text": answer}, f"The results show the answer is {answer}.")]


def _tir_script(task: Task) -> list[Message]:
    """Python does the arithmetic of the worked steps ("a op b = c"), then `Answer: N`."""
    steps = task.metadata.get("steps")
    if not steps:
        raise ValueError(f"task {task.id} (tir) has no metadata['steps'] for the expert")
    plan, code = tir_program(steps)
    answer = str(task.validation.answer)
    call = _call("python", {"code": code}, f"{plan}. Python will do the arithmetic.")
    final = Message("assistant", f"Answer: {answer}", reasoning=f"Python printed {answer}.")
    return [call, final]


def _code_script(task: Task) -> list[Message]:
    """The body that completes the task's stub, in a ```python block, in one reply (the whole
    function for a task without a stub).

    No run_python check: code inside a tool call's JSON string (quotes and newlines to escape)
    is where a tiny model's replies break. The task shows the stub and the expert writes the
    body, as HumanEval's canonical solutions do, because a model that has to write the
    signature miscopies it (`num_greater(xs, t)` -> `kum_greater(xs)`) and the signature then
    picks a memorized body; given the signature and docstring it writes the right body far
    more often (docs/experiments.md, "Code")."""
    name, sol = task.metadata["entry_point"], task.metadata["solution"]
    note = f"I will write {name} to match the description and the example."
    code = task.metadata.get("body") if task.context.get("stub") else None
    return [Message("assistant", f"```python\n{code or sol}```", reasoning=note)]


_REDIRECT = re.compile(r">\s*(\S+)\s*$")


def terminal_check(task: Task) -> str:
    """The command that shows a terminal task's result: `cat` of the file the oracle writes
    to (`... > out.txt`), else the scenario's `look` command run again."""
    m = _REDIRECT.search(task.metadata["solution"].strip())
    return f"cat {m.group(1)}" if m else task.metadata.get("look") or "ls -la"


def _terminal_script(task: Task) -> list[Message]:
    """Act, then check: run the oracle with bash first, look at the result (`terminal_check`),
    then end with a short message (TerminalEnv's verifier reads the workspace state).

    The command comes first so that the instruction it copies its slots from (directory,
    extension, column, output file) is right above it. Looking first puts a file listing
    between the two, and the model then takes slots from the listing or from memory (greedy on
    30 train tasks after SFT: 3 solved look-first, 11 act-first; docs/experiments.md,
    "Terminal")."""
    script = task.metadata["solution"].strip()
    check = terminal_check(task)
    return [
        _call("bash", {"command": script}, "A short shell pipeline does it."),
        _call("bash", {"command": check}, f"Now I check the result: `{check}`."),
        Message("assistant", "Done.", reasoning="The output looks right."),
    ]


def _swe_script(task: Task) -> list[Message]:
    """localize, view_function when the bug sits in another function than the issue's (a
    helper or callee of it), replace_function with the fixed body of the function shown last,
    run_tests, then a short summary.

    A tiny model does not copy a path or a function name from the issue into a tool call: it
    writes one remembered from training instead. Spectrum-based localization needs no
    argument and shows the issue's function; only a bug that shows through another function
    needs a name, the one localize ranks among its suspicious functions (docs/experiments.md,
    "SWE")."""
    bug = task.context["bug"]
    fn, shown = bug["function"], bug.get("issue_function") or bug["function"]
    out = [_call("localize", {}, "I run the tests and the issue's call to find the function.")]
    if fn != shown:
        out.append(
            _call("view_function", {"name": fn}, f"`{shown}` calls `{fn}`; I look at `{fn}` too.")
        )
    return out + [
        _call(
            "replace_function", {"code": fix_code(task)}, "It should do what the docstring says."
        ),
        _call("run_tests", {}, "Now every test should pass."),
        Message("assistant", f"Fixed `{fn}`; the tests pass.", reasoning="The tests pass."),
    ]


def _math_script(task: Task) -> list[Message]:
    answer = str(task.validation.answer)
    reasoning = task.metadata.get("reasoning") or f"The answer is {answer}."
    return [Message("assistant", f"Answer: {answer}", reasoning=reasoning)]


def _tool_script(task: Task) -> list[Message]:
    answer = str(task.validation.answer)
    calls = [_call(c["name"], dict(c["arguments"]), _note(c)) for c in task.metadata["calls"]]
    final = Message(
        "assistant", f"Answer: {answer}", reasoning=f"The tools show the answer is {answer}."
    )
    return calls + [final]


SCRIPTS = {
    "math": _math_script,
    "tool": _tool_script,
    "search": _search_script,
    "tir": _tir_script,
    "code": _code_script,
    "terminal": _terminal_script,
    "swe": _swe_script,
}


# bumped when a kind's script changes, so cached expert episodes of that kind are re-recorded
EXPERT_VERSIONS = {
    "terminal": 2,  # act, then check
    "search": 3,  # name + relation queries, answers from the snippets
    "code": 3,  # the body that completes the task's stub
    "swe": 4,  # localize (with the call), a callee's view when needed, the fixed body
}


def expert_script(task: Task) -> list[Message]:
    """The scripted expert's assistant messages for a world task of any kind in `SCRIPTS`.

    Raises:
        ValueError: for other kinds, or a task lacking the oracle data its kind needs.
    """
    script = SCRIPTS.get(task.kind)
    if script is None:
        raise ValueError(f"no scripted expert for task kind {task.kind!r} ({', '.join(SCRIPTS)})")
    return script(task)


def opening_text(task: Task) -> str:
    """The first user message text the task's environment opens with (what ScriptedEngine
    keys its scripts by): the instruction, plus TIREnv's hint for tir tasks."""
    if task.kind == "tir":
        from arcforge.envs.tir_env import SYSTEM_HINT

        return f"{task.instruction}\n\n{SYSTEM_HINT}"
    return task.instruction


def expert_engine(tokenizer: Any, tasks: list[Task]) -> ScriptedEngine:
    """A ScriptedEngine playing the expert on every task in `tasks`."""
    return ScriptedEngine(tokenizer, {opening_text(t): expert_script(t) for t in tasks})
