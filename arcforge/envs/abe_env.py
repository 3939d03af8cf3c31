"""ABEEnv: a synthesized ABE tool environment, deployed as local Python functions.

ABE (Automated Build Environments) turns each sub-question of a task into a documented tool
and deploys the documents as local functions that answer consistently with the ground-truth
sub-answers. Here the task carries everything in `task.context["abe"]`:
- `tools`: OpenAI function schemas (what the model sees);
- `records`: {"tool", "arguments", "result"} rows, the ground truth the functions answer from;
- `required_calls`: the calls a correct solution makes ({"name", "arguments"}).
`deploy_tools` builds one function per schema. A call is answered by the record of that tool
whose arguments all match the call's (case- and space-insensitive); extra optional arguments
(added by complexity scaling) do not change the answer; a list where the schema allows an array
answers every element (a JSON object) unless a record holds that very list; anything else is an
"error: no record ..." observation.
Reward = (F1 of the calls made against the required calls + final-answer correctness) / 2;
a list-valued call counts as one call per element, unless it matches a required call as it is.
A multi-part answer ("A, B") is compared as a set of normalized parts. A task that requires no
call (a question none of its tools answers) scores 1 for a reply without calls, else 0.
"""

from __future__ import annotations

import json
import re
from typing import Any

from arcforge.envs.base import Env
from arcforge.envs.search_env import normalize_answer
from arcforge.rewards.math import extract_answer
from arcforge.types import Message, Reward, Task, Tool, ToolCall


def _norm(v: Any) -> str:
    return " ".join(str(v).lower().split())


def _fits(record_args: dict[str, Any], call_args: dict[str, Any]) -> bool:
    return all(k in call_args and _norm(call_args[k]) == _norm(v) for k, v in record_args.items())


def _array_params(schema: dict[str, Any]) -> set[str]:
    props = (schema.get("parameters") or {}).get("properties") or {}
    out = set()
    for name, p in props.items():
        t = p.get("type") if isinstance(p, dict) else None
        if t == "array" or (isinstance(t, list) and "array" in t):
            out.add(name)
    return out


def _make_fn(name: str, records: list[dict[str, Any]], arrays: set[str]):
    rows = [r for r in records if r["tool"] == name]

    def one(args: dict[str, Any]) -> str:
        for r in rows:
            if _fits(r["arguments"], args):
                return str(r["result"])
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"error: no record found for {name}({shown})"

    def fn(**kwargs: Any) -> str:
        listed = [k for k, v in kwargs.items() if isinstance(v, list) and k in arrays]
        if not listed or any(_fits(r["arguments"], kwargs) for r in rows):  # a list-valued record
            return one(kwargs)
        key = listed[0]
        return json.dumps({str(v): one({**kwargs, key: v}) for v in kwargs[key]})

    return fn


def deploy_tools(spec: dict[str, Any]) -> dict[str, Tool]:
    """Local tools from an ABE spec's schemas and records (see the module docstring)."""
    tools: dict[str, Tool] = {}
    for schema in spec.get("tools", []):
        f = schema.get("function", schema)
        if not isinstance(f, dict) or not f.get("name"):
            raise ValueError(f"an ABE tool document needs function.name; got {schema!r}")
        name = str(f["name"])
        params = f.get("parameters") or {"type": "object", "properties": {}}
        fn = _make_fn(name, spec.get("records", []), _array_params(f))
        tools[name] = Tool(name, str(f.get("description", "")), params, fn)
    return tools


def expand_call(name: str, args: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A call with a list argument stands for one call per element."""
    for k, v in args.items():
        if isinstance(v, list):
            return [(name, {**args, k: x}) for x in v]
    return [(name, args)]


def _required(name: str, args: dict[str, Any], required: list[dict[str, Any]]) -> bool:
    return any(r["name"] == name and _fits(r["arguments"], args) for r in required)


def call_f1(made: list[tuple[str, dict[str, Any]]], required: list[dict[str, Any]]) -> dict:
    """Precision / recall / F1 of calls made against required calls; each required call is
    matched at most once by a made call with its name and (at least) its arguments."""
    made = [
        c
        for name, args in made
        for c in ([(name, args)] if _required(name, args, required) else expand_call(name, args))
    ]
    free = list(made)
    tp = 0
    for req in required:
        hit = next((c for c in free if c[0] == req["name"] and _fits(req["arguments"], c[1])), None)
        if hit is not None:
            free.remove(hit)
            tp += 1
    p = tp / len(made) if made else 0.0
    r = tp / len(required) if required else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f1, "matched": tp}


def answers_match(pred: str | None, ref: str) -> bool:
    """Normalized equality, as sets of parts for a multi-part answer ("A, B" == "B and A")."""
    if not pred:
        return False

    def parts(s: str) -> set[str]:
        return {normalize_answer(x) for x in re.split(r",|;|\band\b", s) if normalize_answer(x)}

    return parts(pred) == parts(ref)


class ABEEnv(Env):
    """Environment over a task's deployed ABE tools; a reply without tool calls is the answer.

    Args:
        system_prompt: an optional system message.
    """

    def __init__(self, system_prompt: str | None = None) -> None:
        super().__init__(system_prompt)
        self._calls: list[ToolCall] = []
        self._valid: list[bool] = []

    def check(self, task: Task) -> None:
        if not isinstance(task.context.get("abe"), dict) or task.validation.answer is None:
            raise ValueError(f"task {task.id}: ABEEnv needs context['abe'] and validation.answer")

    def start(self, task: Task) -> list[Message]:
        self.tools = list(deploy_tools(task.context["abe"]).values())
        self._calls, self._valid = [], []
        return self.opening(task)

    def record(self, call: ToolCall, valid: bool, observation: Message) -> None:
        self._calls.append(call)
        self._valid.append(valid)

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("ABEEnv.verify called before reset")
        spec = self.task.context["abe"]
        made = [(c.name, c.arguments) for c in self._calls]
        calls = call_f1(made, spec.get("required_calls", []))
        answer = extract_answer(self.reply) if self.reply is not None else None
        correct = float(answers_match(answer, str(self.task.validation.answer)))
        details = {
            "answer": answer,
            "correct": correct,
            **calls,
            "n_tool_calls": len(self._calls),
            "calls_valid": self._valid,
        }
        if not spec.get("required_calls"):  # nothing to call: the right reply makes no call
            return Reward(float(not self._calls), details)
        return Reward((calls["f1"] + correct) / 2, details)
