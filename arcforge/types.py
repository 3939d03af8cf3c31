"""The few data contracts every module speaks (docs/design.md, "Data contracts").

Message, ToolCall, Tool, Task (+ Validation), Segment, Trajectory and Reward. They are plain
dataclasses with explicit JSON round-trips (`to_dict` / `from_dict`) so that they can cross a
file or process boundary without turning into dicts with string keys inside the code.
This module sits at the bottom of the import graph: it imports nothing from arcforge.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
TaskKind = Literal[
    "math", "code", "tir", "swe", "terminal", "search", "tool", "abe", "slides", "chat", "lm"
]
SegmentSource = Literal["model", "env", "template"]


@dataclass
class ToolCall:
    """One call the assistant asked for. `arguments` is the parsed JSON object."""

    name: str
    arguments: dict[str, Any]
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        # Accept both our flat shape and OpenAI's {"function": {"name", "arguments": str}}.
        if "function" in d:
            fn = d["function"]
            args = fn.get("arguments", {})
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            return cls(name=fn["name"], arguments=args, id=d.get("id", ""))
        return cls(name=d["name"], arguments=dict(d.get("arguments") or {}), id=d.get("id", ""))


@dataclass
class Message:
    """A chat message in the OpenAI shape plus two training fields.

    `reasoning` is the thinking block. `train=False` keeps an assistant message in context but
    masks it out of the SFT loss (the "keep the error segment, mask its loss" rule).
    `thinking` on a user message is the turn-level switch: True/False forces thinking on/off for
    the assistant reply to that turn, None follows the template's default.
    """

    role: Role
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    train: bool = True
    thinking: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning is not None:
            d["reasoning"] = self.reasoning
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if not self.train:
            d["train"] = False
        if self.thinking is not None:
            d["thinking"] = self.thinking
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        if not isinstance(d, dict):
            raise ValueError(f"a message must be an object, got {type(d).__name__}")
        role = d.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"message role must be system|user|assistant|tool, got {role!r}")
        content = d.get("content") or ""
        if not isinstance(content, str):
            raise ValueError(f"message content must be a string, got {type(content).__name__}")
        return cls(
            role=role,
            content=content,
            reasoning=d.get("reasoning", d.get("reasoning_content")),
            tool_calls=[ToolCall.from_dict(c) for c in d.get("tool_calls") or []],
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            train=bool(d.get("train", True)),
            thinking=d.get("thinking"),
        )


_PY_TO_JSON = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if hint in _PY_TO_JSON:
        return {"type": _PY_TO_JSON[hint]}
    if origin in (list, tuple):
        args = typing.get_args(hint)
        return {"type": "array", "items": _json_type(args[0]) if args else {}}
    if origin is dict or hint is dict:
        return {"type": "object"}
    if origin is Literal:
        vals = list(typing.get_args(hint))
        return {"type": _PY_TO_JSON.get(type(vals[0]), "string"), "enum": vals}
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_type(args[0]) if len(args) == 1 else {}
    return {}


def _doc_params(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (summary, {param: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary, params, in_args = [], {}, False
    for line in lines:
        s = line.strip()
        if s.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args and re.match(r"^(returns?|raises|yields|examples?):", s.lower()):
            in_args = False
            continue
        if in_args:
            m = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", s)
            if m:
                params[m.group(1)] = m.group(3)
            continue
        if s or summary:
            summary.append(s)
    return " ".join(x for x in summary if x).strip(), params


@dataclass
class Tool:
    """A tool the model can call: name, description, JSON-schema parameters and a callable."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> Tool:
        """Build the schema from `fn`'s type hints and Google-style docstring."""
        summary, docs = _doc_params(fn.__doc__ or "")
        hints = typing.get_type_hints(fn)
        props: dict[str, Any] = {}
        required: list[str] = []
        for p in inspect.signature(fn).parameters.values():
            if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            schema = _json_type(hints.get(p.name, str))
            if p.name in docs:
                schema["description"] = docs[p.name]
            props[p.name] = schema
            if p.default is inspect.Parameter.empty:
                required.append(p.name)
        params = {"type": "object", "properties": props, "required": required}
        return cls(name=name or fn.__name__, description=summary, parameters=params, fn=fn)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class Validation:
    """How a task is checked. Only the fields a kind needs are set.

    answer: the reference final answer (math, search, tool).
    tests: hidden test source (code tasks) or a test file map for repo tasks.
    fail_to_pass / pass_to_pass: SWE test ids.
    verify_script: shell script whose exit code 0 means pass (terminal tasks).
    constraints: checkable constraints of chat/instruction tasks.
    """

    answer: str | None = None
    tests: str | None = None
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    verify_script: str | None = None
    constraints: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Task:
    """One unit of work for an environment; stored as one JSONL line."""

    id: str
    kind: TaskKind
    instruction: str
    context: dict[str, Any] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    validation: Validation = field(default_factory=Validation)
    source: str = ""
    difficulty: float | None = None
    split: str = "train"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        missing = [k for k in ("id", "kind", "instruction") if k not in d]
        if missing:
            raise ValueError(f"task record is missing {', '.join(missing)}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"task record has unknown field(s): {', '.join(unknown)}")
        d = dict(d)
        d["validation"] = Validation(**(d.get("validation") or {}))
        return cls(**d)


@dataclass
class Reward:
    """A scalar score plus a per-signal breakdown (e.g. f2p, p2p, rule, orm, grm)."""

    score: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Segment:
    """A run of tokens with one origin.

    token_ids: (L,) ids exactly as sampled (model) or as tokenized (env / template).
    logprobs: (L,) the inference engine's logprobs for model tokens, None otherwise.
    loss_mask: (L,) 1 where the token is trained on.
    policy_version: the weight version that produced a model segment.
    """

    token_ids: list[int]
    source: SegmentSource
    loss_mask: list[int]
    logprobs: list[float] | None = None
    policy_version: int = 0


@dataclass
class Trajectory:
    """The token-level record of one rollout, built token-in-token-out."""

    segments: list[Segment] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    reward: float = 0.0
    reward_details: dict[str, Any] = field(default_factory=dict)
    task_id: str = ""
    group_id: str = ""
    finish_reason: str = ""

    @property
    def token_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.token_ids]

    @property
    def loss_mask(self) -> list[int]:
        return [m for s in self.segments for m in s.loss_mask]

    @property
    def logprobs(self) -> list[float]:
        """(L,) engine logprobs, 0.0 where a segment has none (those tokens are masked)."""
        return [lp for s in self.segments for lp in (s.logprobs or [0.0] * len(s.token_ids))]

    @property
    def versions(self) -> list[int]:
        return [s.policy_version for s in self.segments for _ in s.token_ids]

    @property
    def start_version(self) -> int:
        vs = [s.policy_version for s in self.segments if s.source == "model"]
        return min(vs) if vs else 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["messages"] = [m.to_dict() for m in self.messages]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return cls(
            segments=[Segment(**s) for s in d.get("segments", [])],
            messages=[Message.from_dict(m) for m in d.get("messages", [])],
            reward=d.get("reward", 0.0),
            reward_details=d.get("reward_details", {}),
            task_id=d.get("task_id", ""),
            group_id=d.get("group_id", ""),
            finish_reason=d.get("finish_reason", ""),
        )
