"""Names, draws, results and the responder protocol shared by every external suite."""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs

from arcforge.errors import UserError
from arcforge.stats import mean_ci, wilson_ci

T = TypeVar("T")

# prefix -> the module whose import registers it (imported on first use, so an optional
# dependency of one suite never breaks another)
_MODULES = {
    "bfcl": "arcforge.eval.external.bfcl",
    "reasoning_gym": "arcforge.eval.external.rgym",
    "tasks": "arcforge.eval.external.tasks",
    "swebench": "arcforge.eval.external.swebench",
}
_REGISTRY: dict[str, Callable[[SuiteSpec], ExternalSuite]] = {}


class Responder(Protocol):
    """One assistant turn: OpenAI-shaped `messages` (and `tools`, OpenAI function schemas, or
    None) in; one OpenAI-shaped assistant message out: `{"role": "assistant", "content": str,
    "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": str}}] | None,
    "reasoning_content": str | None}`. A reply the dialect cannot parse comes back as content
    with no tool calls, never as an exception."""

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SuiteSpec:
    """A parsed suite name: `prefix:arg?n=N&seed=S&key=value`."""

    prefix: str
    arg: str
    n: int | None = None
    seed: int = 0
    options: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.prefix}:{self.arg}"

    def int_option(self, key: str, default: int, lo: int = 1) -> int:
        """An integer option (`?turns=30`); a UserError names a bad one."""
        try:
            value = int(self.options.get(key, default))
        except ValueError:
            raise UserError(f"{self.name}: ?{key}= must be an integer") from None
        if value < lo:
            raise UserError(f"{self.name}: ?{key}= must be at least {lo}")
        return value

    def draw(self, items: Sequence[T]) -> list[T]:
        """The suite's items: all of them, or `n` drawn at random with `seed` (order kept)."""
        if self.n is None or self.n >= len(items):
            return list(items)
        idx = sorted(random.Random(self.seed).sample(range(len(items)), self.n))
        return [items[i] for i in idx]


def parse_spec(name: str) -> SuiteSpec:
    """Parse `prefix:arg?n=..&seed=..`; a UserError names what is wrong."""
    if ":" not in name:
        raise UserError(
            f"external suite {name!r} is not of the form PREFIX:ARG (e.g. bfcl:simple_python)"
        )
    prefix, rest = name.split(":", 1)
    arg, _, query = rest.partition("?")
    if not arg:
        raise UserError(f"external suite {name!r} has nothing after {prefix + ':'!r}")
    opts = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    try:
        n = int(opts.pop("n")) if "n" in opts else None
        seed = int(opts.pop("seed", "0"))
    except ValueError as e:
        raise UserError(f"external suite {name!r}: n and seed must be integers ({e})") from None
    if n is not None and n <= 0:
        raise UserError(f"external suite {name!r}: n must be positive")
    return SuiteSpec(prefix=prefix, arg=arg, n=n, seed=seed, options=opts)


def register(prefix: str) -> Callable[[Callable[[SuiteSpec], ExternalSuite]], Callable]:
    """Decorator: `@register("bfcl")` on a factory `SuiteSpec -> ExternalSuite`."""

    def deco(factory: Callable[[SuiteSpec], ExternalSuite]) -> Callable:
        _REGISTRY[prefix] = factory
        return factory

    return deco


def known_prefixes() -> list[str]:
    return sorted(set(_MODULES) | set(_REGISTRY))


def open_suite(name: str) -> ExternalSuite:
    """The suite a name designates (its module imported on first use)."""
    spec = parse_spec(name)
    if spec.prefix not in _REGISTRY and spec.prefix in _MODULES:
        importlib.import_module(_MODULES[spec.prefix])
    if spec.prefix not in _REGISTRY:
        raise UserError(f"unknown external suite prefix {spec.prefix!r}; known: {known_prefixes()}")
    return _REGISTRY[spec.prefix](spec)


@dataclass
class ItemResult:
    """One item's outcome: `score` in [0, 1] from the benchmark's own checker; `detail` holds
    what the checker said (error type, the decoded call, the verifier's log tail)."""

    id: str
    score: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class SuiteResult:
    """A suite's scores. `meta` records what the score depends on besides the model (the
    benchmark package's version, mode, draw, wall time); `baselines` maps a trivial baseline's
    name to its score on the same items."""

    name: str
    items: list[ItemResult]
    meta: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(i.score for i in self.items) / len(self.items) if self.items else float("nan")

    @property
    def ci(self) -> tuple[float, float]:
        scores = [i.score for i in self.items]
        if all(s in (0.0, 1.0) for s in scores):
            return wilson_ci(sum(scores), len(scores))
        _, lo, hi = mean_ci(scores)
        return (lo, hi)

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "ci": list(self.ci),
            "n": len(self.items),
            "scores": {i.id: i.score for i in self.items},
            "details": {i.id: i.detail for i in self.items},
            "meta": self.meta,
            "baselines": self.baselines,
        }


class ExternalSuite(Protocol):
    spec: SuiteSpec

    def run(self, responder: Responder) -> SuiteResult: ...


# --- Agentic suites (tasks:, swebench:): one episode of an environment driven by a Responder.


def openai_message(m: Any) -> dict[str, Any]:
    """An arcforge Message as the OpenAI chat shape a Responder reads."""
    import json

    d: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        d["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in m.tool_calls
        ]
    if m.role == "tool":
        d["tool_call_id"] = m.tool_call_id or ""
        if m.name:
            d["name"] = m.name
    return d


def reply_message(reply: dict[str, Any], turn: int) -> tuple[Any, list[str]]:
    """A Responder's reply as an arcforge Message, plus one error per tool call that cannot be
    read (arguments that are not a JSON object, no function name); those calls are dropped."""
    import json

    from arcforge.types import Message, ToolCall

    calls, errors = [], []
    for i, c in enumerate(reply.get("tool_calls") or []):
        fn = (c or {}).get("function") or {}
        args = fn.get("arguments", {})
        try:
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            if not isinstance(args, dict) or not fn.get("name"):
                raise ValueError("a tool call needs a function name and a JSON object of arguments")
        except ValueError as err:
            errors.append(f"{fn.get('name') or '?'}: {err}")
            continue
        calls.append(ToolCall(str(fn["name"]), args, id=str(c.get("id") or f"call-{turn}-{i}")))
    msg = Message(
        "assistant",
        str(reply.get("content") or ""),
        reasoning=reply.get("reasoning_content"),
        tool_calls=calls,
    )
    return msg, errors


@dataclass
class Episode:
    """What one agentic episode did: `turns` assistant replies, why it stopped ("answer": a
    reply without tool calls; "max_turns"; "timeout": the task's agent time ran out; "error":
    the responder or the environment raised, message in `error`), the transcript."""

    turns: int = 0
    stop: str = ""
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)


def drive(
    env: Any,
    opening: list[Any],
    responder: Responder,
    max_turns: int,
    deadline: float | None = None,
    system: str | None = None,
) -> Episode:
    """Run an environment that `reset` already opened (its opening messages `opening`) with
    `responder` as the agent, for at most `max_turns` replies and until `deadline`
    (time.monotonic()). A reply's unreadable tool calls come back as error observations; a
    responder or step that raises ends the episode with stop "error" (the caller still
    verifies: what the agent did so far is graded)."""
    import time

    from arcforge.types import Message

    tools = [t.schema() for t in env.tools] or None
    msgs = ([{"role": "system", "content": system}] if system else []) + [
        openai_message(m) for m in opening
    ]
    ep = Episode(messages=msgs)
    while True:
        if ep.turns >= max_turns:
            ep.stop = "max_turns"
            break
        if deadline is not None and time.monotonic() >= deadline:
            ep.stop = "timeout"
            break
        try:
            reply = responder(msgs, tools)
        except Exception as err:  # an endpoint fault: grade what was done, keep the run going
            ep.stop, ep.error = "error", f"responder raised {type(err).__name__}: {err}"
            break
        ep.turns += 1
        msg, errors = reply_message(reply, ep.turns)
        msgs.append(openai_message(msg))
        obs = [Message("tool", f"error: malformed tool call: {e}", name="parser") for e in errors]
        if errors and not msg.tool_calls:
            msgs += [openai_message(o) for o in obs]
            continue
        try:
            res = env.step(msg)
        except Exception as err:
            ep.stop, ep.error = "error", f"environment step raised {type(err).__name__}: {err}"
            break
        msgs += [openai_message(o) for o in obs + res.observations]
        if res.done:
            ep.stop = "answer"
            break
    return ep


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from n samples of which c passed (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    prob = 1.0
    for i in range(n - c + 1, n + 1):
        prob *= 1.0 - k / i
    return 1.0 - prob
