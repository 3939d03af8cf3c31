"""SFT demonstrations written by scripted expert solvers, from train-split tasks only.

Tool episodes call the world's real tools, so every observation is what the tool returns. Modes
(`Demo.mode`): "interleaved" (one user turn, reasoning before every tool call and reply),
"preserved" / "dropped" (two user turns; the renderer keeps or drops earlier turns' reasoning),
"turn_level" (a user turn with thinking=False gets replies without reasoning). Correction
episodes make one deliberate wrong call (misspelled entity or wrong relation name), see the
error and retry; that wrong assistant message carries train=False. Terminal demos answer with
the oracle script in a ```bash block (no simulated tool outputs); SWE demos view the real buggy
file and make the real one-line edit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from arcforge.types import Message, Task, Tool, ToolCall
from arcforge.world.code.pysource import definition_at, definitions, show_definition

NEED = {
    "born_in": "birthplace",
    "lives_in": "home city",
    "works_for": "employer",
    "born_year": "birth year",
    "occupation": "occupation",
    "located_in": "country",
    "population": "population",
    "founded_by": "founder",
    "headquartered_in": "headquarters city",
    "founded_year": "founding year",
    "industry": "industry",
    "created_by": "creator",
    "published_by": "publisher",
    "published_year": "publication year",
    "work_type": "kind of work",
    "capital": "capital",
}
MODES = ("interleaved", "preserved", "dropped", "turn_level")
WRONG_RELATION = {
    "born_in": "birthplace",
    "lives_in": "home",
    "works_for": "employer",
    "founded_by": "founder",
    "created_by": "author",
    "published_by": "publisher",
    "headquartered_in": "headquarters",
    "located_in": "country",
    "founded_year": "year",
    "capital": "capital_city",
}


@dataclass
class Demo:
    id: str
    kind: str
    messages: list[Message]
    tools: list[str] = field(default_factory=list)
    mode: str = "interleaved"
    task_id: str = ""
    # every task the demo shows (a two-turn demo shows two); empty: just `task_id`
    task_ids: list[str] = field(default_factory=list)

    def shown(self) -> list[str]:
        """The ids of the train tasks this demo's conversation answers."""
        return self.task_ids or ([self.task_id] if self.task_id else [])

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "messages": [m.to_dict() for m in self.messages],
            "tools": self.tools,
            "mode": self.mode,
            "task_id": self.task_id,
            "task_ids": self.shown(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Demo:
        return cls(
            d["id"],
            d["kind"],
            [Message.from_dict(m) for m in d["messages"]],
            d["tools"],
            d["mode"],
            d["task_id"],
            list(d.get("task_ids", [])),
        )


def reasoning_demo(task: Task, thinking: bool) -> list[Message]:
    """User question -> worked steps as reasoning and 'Answer: N'; or no reasoning when off."""
    user = Message("user", task.instruction, thinking=None if thinking else False)
    reasoning = task.metadata["reasoning"] if thinking else None
    return [user, Message("assistant", f"Answer: {task.validation.answer}", reasoning=reasoning)]


def _need(call: dict) -> str:
    a = call["arguments"]
    if call["name"] == "calculator":
        return f"I need to compute {a['expression']}."
    return f"I need the {NEED.get(a['relation'], a['relation'])} of {a['entity']}."


class _Episode:
    """Builds one tool-use conversation, numbering tool-call ids and calling real tools."""

    def __init__(self, tools: dict[str, Tool]) -> None:
        self.tools, self.msgs, self.n = tools, [], 0

    def call(self, name: str, args: dict, reasoning: str | None, train: bool = True) -> str:
        cid = f"call_{self.n}"
        self.n += 1
        tc = ToolCall(name, dict(args), cid)
        self.msgs.append(
            Message("assistant", "", reasoning=reasoning, tool_calls=[tc], train=train)
        )
        fn = self.tools[name].fn
        assert fn is not None
        result = str(fn(**args))
        self.msgs.append(Message("tool", result, tool_call_id=cid, name=name))
        return result

    def solve(self, task: Task, think: bool, wrong: str | None = None) -> None:
        """Replay the task's oracle calls; `wrong` ("relation" | "entity") first fumbles call 0."""
        for i, call in enumerate(task.metadata["calls"]):
            note = _need(call)
            if wrong and i == 0:
                error = self._wrong_step(call, wrong)
                what = "relation name" if wrong == "relation" else "spelling of the name"
                note = f"The lookup failed ({error}). {note} I will retry with the right {what}."
            self.call(call["name"], call["arguments"], note if think else None)
        answer = task.validation.answer
        reasoning = f"The tools show the answer is {answer}." if think else None
        self.msgs.append(Message("assistant", f"Answer: {answer}", reasoning=reasoning))

    def _wrong_step(self, call: dict, wrong: str) -> str:
        args = dict(call["arguments"])
        if wrong == "relation":
            args["relation"] = WRONG_RELATION.get(args["relation"], args["relation"] + "s")
        else:
            ent = args["entity"]
            k = max(1, len(ent) // 2)
            args["entity"] = ent[:k] + ent[k + 1 :]
        lookup = self.tools["lookup"].fn
        assert lookup is not None
        if not lookup(**args).startswith("error:"):  # the typo hit a real name: make it worse
            args["entity"] += "x"
        why = _need({"name": "lookup", "arguments": args})
        return self.call("lookup", args, why, train=False)


def tool_demo(tasks: list[Task], tools: dict[str, Tool], mode: str) -> list[Message]:
    """One or two user turns solved with real tool calls; `tasks` has 1 (interleaved) or 2."""
    ep = _Episode(tools)
    for turn, task in enumerate(tasks):
        off = mode == "turn_level" and turn == 1
        text = task.instruction if turn == 0 else f"One more question: {task.instruction}"
        ep.msgs.append(Message("user", text, thinking=False if off else None))
        ep.solve(task, think=not off)
    return ep.msgs


def correction_demo(task: Task, tools: dict[str, Tool], rng: random.Random) -> list[Message]:
    """A lookup episode whose first call is wrong (train=False), followed by the fix."""
    ep = _Episode(tools)
    ep.msgs.append(Message("user", task.instruction))
    ep.solve(task, think=True, wrong=rng.choice(["relation", "entity"]))
    return ep.msgs


def chat_demo(task: Task) -> list[Message]:
    rules = "; ".join(c["type"] for c in task.validation.constraints)
    return [
        Message("user", task.instruction),
        Message("assistant", task.metadata["solution"], reasoning=f"Constraints to meet: {rules}."),
    ]


def code_demo(task: Task) -> list[Message]:
    name = task.metadata["entry_point"]
    body = task.metadata.get("body") if task.context.get("stub") else None
    sol = body or task.metadata["solution"]
    return [
        Message("user", task.instruction),
        Message(
            "assistant", f"```python\n{sol}```", reasoning=f"I will write {name} step by step."
        ),
    ]


def terminal_demo(task: Task) -> list[Message]:
    script = task.metadata["solution"]
    return [
        Message("user", task.instruction),
        Message(
            "assistant", f"```bash\n{script}\n```", reasoning="A short shell pipeline does it."
        ),
    ]


def _swe_change(task: Task) -> str:
    """What is wrong, read from the fix diff: the removed and added lines of the fix."""
    lines = task.metadata["patch"].splitlines()[3:]
    gone = [ln[1:].strip() for ln in lines if ln.startswith("-")]
    back = [ln[1:].strip() for ln in lines if ln.startswith("+")]
    if gone and back:
        return f"`{gone[0]}` should be `{back[0]}`."
    if back:
        return f"it lacks the case `{back[0]}`."
    return "one line is wrong."


def fixed_function(task: Task) -> str:
    """The whole definition of a world SWE task's buggy function as the correct module has it
    (`metadata["fixed"]`: the oracle, train-side only)."""
    return task.metadata["fixed"]


def fixed_body(task: Task) -> str:
    """That function's fixed body below its signature and docstring: the expert's replacement
    (`replace_function` keeps the rest)."""
    fixed = fixed_function(task)
    d = definitions(fixed, task.context["bug"]["path"])[0]
    return "".join(fixed.splitlines(keepends=True)[d.body - 1 : d.end])


def fix_code(task: Task) -> str:
    """What the expert gives replace_function: the fixed body, or the whole fixed definition
    when the bug sits in the signature (a changed parameter default), which a body keeps."""
    bug = task.context["bug"]
    d = definition_at(bug["mutated"], bug["path"], bug["function"], bug["line"])
    return fixed_function(task) if bug["line"] < d.body else fixed_body(task)


def swe_demo(task: Task) -> list[Message]:
    """view_function on the function the issue names (and on the function it calls where the
    bug is) -> replace_function with the fixed body (the function shown last) -> summary with
    the diff (the tools and observations of SWEEnv's; the expert episodes localize first
    instead, which needs a test run)."""
    bug = task.context["bug"]
    path, line, fn = bug["path"], bug["line"], bug["function"]
    issue_fn = bug.get("issue_function") or fn
    d = definition_at(bug["mutated"], path, fn, line)
    msgs = [Message("user", task.instruction)]
    views = [issue_fn] if issue_fn == fn else [issue_fn, fn]
    for i, name in enumerate(views):
        shown = next(x for x in definitions(bug["mutated"], path) if x.name == name)
        why = (
            f"The issue is about `{name}`; I look at its definition."
            if i == 0
            else f"`{issue_fn}` looks right, but it calls `{fn}`; I look at that."
        )
        msgs += [
            Message(
                "assistant",
                "",
                reasoning=why,
                tool_calls=[ToolCall("view_function", {"name": name}, f"call_{i}")],
            ),
            Message(
                "tool",
                show_definition(shown, bug["mutated"]),
                tool_call_id=f"call_{i}",
                name="view_function",
            ),
        ]
    k = len(views)
    return msgs + [
        Message(
            "assistant",
            "",
            reasoning=f"In `{fn}`, {_swe_change(task)}",
            tool_calls=[ToolCall("replace_function", {"code": fix_code(task)}, f"call_{k}")],
        ),
        Message(
            "tool",
            f"ok: replaced {d.name} in {path} (lines {d.start}-{d.end})",
            tool_call_id=f"call_{k}",
            name="replace_function",
        ),
        Message(
            "assistant",
            f"Fixed `{fn}` in {path}:\n```diff\n{task.metadata['patch']}```",
            reasoning="The edit restores the intended behaviour.",
        ),
    ]
