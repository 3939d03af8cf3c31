"""GEM: tool-use trajectories synthesized from plain text (text -> trajectory).

    1 filter   keep texts that describe a multi-step procedure
    2 extract  the workflow (ordered steps) and a tool set (OpenAI schemas)
    3 generate one trajectory: system, user request, assistant tool calls, tool responses, answer
    4 refine   more varied tool use (independent calls in parallel), realistic tool responses
             (structured JSON), a harder, less explicit request
    5 validate every call names a declared tool with schema-valid arguments
             (arcforge.chat.validate), every call gets exactly one response, the episode ends
             with a plain assistant answer
Each of steps 1-4 has an LLM route (any OpenAI-compatible endpoint through LLMClient) and a rule
route, so the world's plain texts work without a model:
- worked arithmetic ("Solution: 3 * 9 = 27. ... so 27 - 2 = 25.") becomes a calculator
  workflow whose tool responses are computed for real (arcforge.world.knowledge.tools.calculate);
- numbered / "Step N" lists become one tool per distinct action (verb_object), the step's
  quoted values and numbers its arguments; their responses are simulated acknowledgements.
Rule-route limitation (deliberate): generic step tools are shallow (one "target" argument plus
value / amount); only the LLM route designs rich tools for free prose.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from arcforge.chat.validate import validate_call
from arcforge.types import Message, Tool, ToolCall
from arcforge.world.knowledge.tools import calculate

SYSTEM = "You are a helpful assistant. Use the tools when they help; answer when done."
_EQ = re.compile(r"^([\d\s+\-*/().]+?)\s*=\s*(-?\d+(?:\.\d+)?)$")
_STEP = re.compile(r"^\s*(?:step\s*)?(\d+)\s*[.):]\s+(.+)$", re.IGNORECASE)
_SEQ = re.compile(r"\b(first|then|next|after that|finally)\b", re.IGNORECASE)
_QUOTED = re.compile(r"[`\"']([^`\"']{1,60})[`\"']")
_STOP = {
    "the",
    "a",
    "an",
    "to",
    "of",
    "your",
    "it",
    "and",
    "with",
    "for",
    "in",
    "on",
    "into",
    "from",
    "at",
    "by",
    "before",
    "after",
}
CALCULATOR = Tool.from_function(calculate, name="calculator")


@dataclass
class GemItem:
    """One text on its way to a trajectory."""

    id: str
    text: str
    route: str = "rule"  # rule | llm
    kind: str = ""  # rule route: math | steps
    goal: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"text", "tool", "arguments"}
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI schemas
    messages: list[Message] = field(default_factory=list)
    refinements: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """The SFT record: messages (OpenAI shape), tool names (the key the SFT stage reads),
        tool schemas, provenance."""
        names = [t.get("function", t).get("name") for t in self.tools]
        return {
            "id": self.id,
            "messages": [m.to_dict() for m in self.messages],
            "tools": names,
            "tool_schemas": self.tools,
            "source": f"gem:{self.route}:{self.kind or 'text'}",
            "workflow": [s["text"] for s in self.steps],
            "refinements": self.refinements,
        }

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["messages"] = [m.to_dict() for m in self.messages]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GemItem:
        return cls(**{**d, "messages": [Message.from_dict(m) for m in d.get("messages", [])]})


# ---------------------------------------------------------------- 1 filter


def math_steps(text: str) -> list[tuple[str, str]]:
    """(expression, result) of each top-level step of a worked solution that checks out."""
    sol = next((ln for ln in text.splitlines() if ln.startswith("Solution:")), "")
    steps = []
    for sent in re.split(r"\.\s+|\.$", sol.removeprefix("Solution:").strip()):
        part = sent.rsplit(", so ", 1)[-1].strip()
        m = _EQ.match(part)
        if m and calculate(m[1].strip()) == m[2]:
            steps.append((m[1].strip(), m[2]))
    return steps


def list_steps(text: str) -> list[str]:
    """Numbered / "Step N" lines, or sentences led by first / then / next / finally."""
    numbered = [m[2].strip() for ln in text.splitlines() if (m := _STEP.match(ln))]
    if len(numbered) >= 2:
        return numbered
    sents = [s.strip() for s in re.split(r"(?<=[.!])\s+", text) if _SEQ.match(s.strip())]
    return sents if len(sents) >= 3 else []


def is_procedure(text: str) -> bool:
    """Rule filter: at least two checkable calculation steps or an explicit step list."""
    return len(math_steps(text)) >= 2 or len(list_steps(text)) >= 2


# ---------------------------------------------------------------- 2 extract


def _step_tool(step: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(tool name, argument schema, arguments) of a generic step."""
    body = _SEQ.sub("", step).strip(" ,.")
    words = [w for w in re.findall(r"[a-z]+", body.lower()) if w not in _STOP]
    name = "_".join(words[:2]) or "do_step"
    props: dict[str, Any] = {"target": {"type": "string", "description": "what the step acts on"}}
    args: dict[str, Any] = {"target": " ".join(body.split()[1:])[:80] or body[:80]}
    quoted = _QUOTED.search(body)
    if quoted:
        props["value"] = {"type": "string", "description": "the exact value the step uses"}
        args["value"] = quoted[1]
    number = re.search(r"\b\d+(?:\.\d+)?\b", body)
    if number:
        props["amount"] = {"type": "number", "description": "the quantity the step uses"}
        args["amount"] = float(number[0]) if "." in number[0] else int(number[0])
    return name, props, args


def _schema(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    """The OpenAI function-tool schema of a tool taking the object `props` (`required` keys)."""
    params = {"type": "object", "properties": props, "required": required}
    return Tool(name, description, params).schema()


def extract_rules(item: GemItem) -> bool:
    """Fill goal / steps / tools from the text; False when the text has no procedure."""
    calc = math_steps(item.text)
    if len(calc) >= 2:
        q = next((ln for ln in item.text.splitlines() if ln.startswith("Question:")), "")
        item.kind, item.goal = "math", q.removeprefix("Question:").strip() or "Compute the result."
        item.steps = [
            {
                "text": f"{e} = {r}",
                "tool": "calculator",
                "arguments": {"expression": e},
                "result": r,
            }
            for e, r in calc
        ]
        item.tools = [CALCULATOR.schema()]
        return True
    steps = list_steps(item.text)
    if len(steps) < 2:
        return False
    item.kind = "steps"
    item.goal = next((ln.strip(" #:") for ln in item.text.splitlines() if ln.strip()), "the task")
    tools: dict[str, dict[str, Any]] = {}
    for st in steps:
        name, props, args = _step_tool(st)
        tools.setdefault(name, {})
        tools[name].update(props)
        item.steps.append(
            {"text": st, "tool": name, "arguments": args, "result": f"done: {st.rstrip('.')}"}
        )
    item.tools = [
        _schema(n, f"Carry out the step '{n.replace('_', ' ')}'.", p, ["target"])
        for n, p in tools.items()
    ]
    return True


# ---------------------------------------------------------------- 3 generate


def generate_rules(item: GemItem) -> None:
    """System, user request, one assistant call per step with its response, final answer."""
    if item.kind == "math":
        request = item.goal
    else:
        listing = "\n".join(f"{i + 1}. {s['text']}" for i, s in enumerate(item.steps))
        request = f"Please help me with: {item.goal}\nThe steps are:\n{listing}"
    msgs = [Message("system", SYSTEM), Message("user", request)]
    for i, st in enumerate(item.steps):
        call = ToolCall(st["tool"], dict(st["arguments"]), id=f"call-{i}")
        msgs.append(Message("assistant", "", reasoning=f"Next: {st['text']}", tool_calls=[call]))
        msgs.append(Message("tool", st["result"], tool_call_id=call.id, name=call.name))
    final = item.steps[-1]["result"] if item.kind == "math" else "All steps are done."
    msgs.append(Message("assistant", f"Answer: {final}" if item.kind == "math" else final))
    item.messages = msgs


# ---------------------------------------------------------------- 4 refine


def _parallelize(msgs: list[Message]) -> tuple[list[Message], bool]:
    """Fold two consecutive single-call turns into one parallel turn when the second call does
    not use the first call's result."""
    out: list[Message] = []
    i, changed = 0, False
    while i < len(msgs):
        m = msgs[i]
        nxt = msgs[i + 2] if i + 3 < len(msgs) else None
        if (
            m.role == "assistant"
            and len(m.tool_calls) == 1
            and nxt is not None
            and nxt.role == "assistant"
            and len(nxt.tool_calls) == 1
            and msgs[i + 1].role == "tool"
            and msgs[i + 3].role == "tool"
            and msgs[i + 1].content not in json.dumps(nxt.tool_calls[0].arguments)
        ):
            note = f"{m.reasoning or ''} {nxt.reasoning or ''}".strip()
            both = Message(
                "assistant", "", reasoning=note, tool_calls=[m.tool_calls[0], nxt.tool_calls[0]]
            )
            out += [both, msgs[i + 1], msgs[i + 3]]
            i, changed = i + 4, True
            continue
        out.append(m)
        i += 1
    return out, changed


def _realistic(msgs: list[Message]) -> list[Message]:
    """Tool responses as the structured JSON a real service would send."""
    calls = {c.id: c for m in msgs for c in m.tool_calls}
    out = []
    for k, m in enumerate(msgs):
        if m.role == "tool" and not m.content.startswith("{"):
            call = calls.get(m.tool_call_id or "")
            body = {
                "status": "ok",
                "request_id": f"req-{k:04d}",
                "result": m.content,
                "input": call.arguments if call else {},
            }
            m = Message("tool", json.dumps(body), tool_call_id=m.tool_call_id, name=m.name)
        out.append(m)
    return out


def refine_rules(item: GemItem) -> None:
    """Parallel independent calls, structured responses, and a request that no longer lists
    the steps (the model must plan them)."""
    msgs, changed = _parallelize(item.messages)
    if changed:
        item.refinements.append("parallel_calls")
    msgs = _realistic(msgs)
    item.refinements.append("realistic_responses")
    if item.kind == "steps":
        user = next(i for i, m in enumerate(msgs) if m.role == "user")
        msgs[user] = Message(
            "user",
            f"I need to get this done: {item.goal}. Work out the steps yourself and use the tools.",
        )
        item.refinements.append("harder_request")
    item.messages = msgs


# ---------------------------------------------------------------- 5 validate


def schema_tools(schemas: list[dict[str, Any]]) -> dict[str, Tool]:
    """Tools (no callables) from OpenAI schemas, for validation."""
    out = {}
    for s in schemas:
        f = s.get("function", s) if isinstance(s, dict) else {}
        if not isinstance(f, dict) or not f.get("name"):
            raise ValueError(f"a tool schema needs function.name; got {s!r:.120}")
        params = f.get("parameters") or {"type": "object", "properties": {}}
        out[str(f["name"])] = Tool(str(f["name"]), str(f.get("description", "")), params)
    return out


def validate_trajectory(messages: list[Message], schemas: list[dict[str, Any]]) -> list[str]:
    """Every problem of a trajectory (empty when it conforms)."""
    try:
        tools = schema_tools(schemas)
    except ValueError as err:
        return [str(err)]
    problems: list[str] = []
    roles = [m.role for m in messages]
    if "user" not in roles or any(r != "system" for r in roles[: roles.index("user")]):
        problems.append("the trajectory must open with (system and) a user message")
    if not messages or messages[-1].role != "assistant" or messages[-1].tool_calls:
        problems.append("the trajectory must end with an assistant answer without tool calls")
    pending: dict[str, str] = {}
    for i, m in enumerate(messages):
        if m.role == "assistant":
            if pending:
                problems.append(f"message {i}: calls {sorted(pending)} were never answered")
                pending = {}
            for c in m.tool_calls:
                err = validate_call(c, tools)
                if err:
                    problems.append(f"message {i}: {err}")
                if not c.id or c.id in pending:
                    problems.append(f"message {i}: tool call {c.name!r} needs a unique id")
                pending[c.id] = c.name
        elif m.role == "tool":
            if m.tool_call_id not in pending:
                problems.append(f"message {i}: tool response to unknown call {m.tool_call_id!r}")
            pending.pop(m.tool_call_id or "", None)
    if not any(m.tool_calls for m in messages):
        problems.append("the trajectory has no tool call")
    return problems
