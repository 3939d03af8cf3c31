"""The Environment protocol, the tool-call executor, and `Env`, the base class of every
environment in this package.

An environment is a small class: `reset(task)` gives the opening messages and sets `tools`,
`step(assistant_message)` executes the message's tool calls and returns observations,
`verify()` grades the episode into a `Reward`. `Env` runs that loop once for all of them; a
subclass fills in its hooks (see `Env`). Tool calls that are malformed, name an unknown tool,
have wrong argument types, or raise, become an error observation that tells the model what was
wrong — never an exception out of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from arcforge.chat.validate import validate_call
from arcforge.sandbox.types import Sandbox
from arcforge.types import Message, Reward, Task, Tool, ToolCall

MAX_OBSERVATION_CHARS = 8000


@dataclass
class StepResult:
    """What one assistant message caused: tool observations and whether the episode ended."""

    observations: list[Message]
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    tools: list[Tool]

    def reset(self, task: Task) -> list[Message]: ...

    def step(self, message: Message) -> StepResult: ...

    def verify(self) -> Reward: ...

    def close(self) -> None: ...


def execute_call(
    call: ToolCall, tools: dict[str, Tool], max_chars: int = MAX_OBSERVATION_CHARS
) -> Message:
    """Run one tool call; any problem becomes an `error: ...` tool message."""
    tool = tools.get(call.name)
    if tool is None:
        text = f"error: unknown tool {call.name!r}; available tools: {', '.join(sorted(tools))}"
    elif (problem := validate_call(call, {tool.name: tool})) is not None:
        text = f"error: {problem}"
    elif tool.fn is None:
        text = f"error: tool {call.name!r} cannot be executed here"
    else:
        try:
            text = str(tool.fn(**call.arguments))
        except Exception as err:  # the model's call failed: tell it why, keep the episode alive
            text = f"error: {call.name} raised {type(err).__name__}: {err}"
    if len(text) > max_chars:
        text = text[:max_chars] + f"\n[... truncated {len(text) - max_chars} characters]"
    return Message(role="tool", content=text, tool_call_id=call.id or None, name=call.name)


def execute_calls(
    message: Message, tools: dict[str, Tool], parse_errors: list[str] | None = None
) -> list[Message]:
    """Observations for every call in an assistant message, plus one per parse error."""
    obs = [
        Message(role="tool", content=f"error: malformed tool call: {e}", name="parser")
        for e in parse_errors or []
    ]
    return obs + [execute_call(c, tools) for c in message.tool_calls]


class Env:
    """The base every environment in `arcforge.envs` builds on: the episode loop of `reset` and
    `step`, with hooks a subclass overrides for what its tasks need.

    An episode: `reset(task)` opens it; each `step(message)` runs the message's tool calls
    (through `call_tool`, each one then passed to `record`) and returns their observations; a
    message without tool calls goes to `finish`, which by default keeps its text as `reply` and
    ends the episode; `verify()` grades it; `close()` releases what the episode holds.

    Hooks, in the order an episode calls them:
        check(task): first thing in `reset`, before anything of the last episode is released;
            raises ValueError naming what the task lacks. Default: accept every task.
        start(task): in `reset`, after `close()` (with `task` and `reply` cleared; `task` is
            set once `start` returns): open what the episode needs (a sandbox in `sb`, a
            server), set `tools`, clear the subclass's own per-episode state, and return the
            opening messages. Default: `opening(task)`, the system prompt (if any) and the
            task's instruction.
        call_tool(call, tools): in `step`, once per tool call: its observation. Default:
            `execute_call` (unknown tools, bad arguments and exceptions become error
            observations).
        record(call, valid, observation): in `step`, after each call, with `valid` telling
            whether the call named a known tool with arguments matching its schema: keep what
            `verify` needs of it. Default: nothing.
        finish(message): in `step`, for a message without tool calls (for every message when
            `single_turn` is set): returns the step's result. Default: keep the message's
            text as `reply` and end the episode. Override to grade a submission and go on
            (ChainEnv) or to run what the final message holds (TerminalEnv).
        verify(): after the episode: its Reward. Every subclass implements it.
        close(): at the start of every `reset` and when the caller is done: releases the
            episode's resources. Default: close `sb`; a subclass holding more extends it and
            calls `super().close()`.

    An episode also ends after a step whose tool calls set `reply` (an answer tool, SearchEnv).

    Attributes:
        system_prompt: the system message `opening` puts first (None for none).
        tools: the tools offered this episode (set in `start` or the constructor).
        task: the episode's task (None before the first `reset`).
        reply: the text that ended the episode (None while it runs).
        sb: the sandbox the episode's tools act in, if any.
        single_turn: the first assistant message ends the episode, tool calls or not.
    """

    single_turn = False

    def __init__(self, system_prompt: str | None = None) -> None:
        self.system_prompt = system_prompt
        self.tools: list[Tool] = []
        self.task: Task | None = None
        self.reply: str | None = None
        self.sb: Sandbox | None = None

    # ---- the episode loop ----------------------------------------------------------------

    def reset(self, task: Task) -> list[Message]:
        """Start an episode of `task`; returns its opening messages."""
        self.check(task)
        self.close()
        self.task, self.reply = None, None
        opening = self.start(task)
        self.task = task  # only now: after a failed start, `step` refuses to run
        return opening

    def step(self, message: Message) -> StepResult:
        """Run the assistant message's tool calls, or end the turn loop through `finish`."""
        if self.task is None:
            raise RuntimeError("call reset(task) before step()")
        if self.single_turn or not message.tool_calls:
            return self.finish(message)
        tools = {t.name: t for t in self.tools}
        obs = [self.call_tool(call, tools) for call in message.tool_calls]
        for call, o in zip(message.tool_calls, obs):
            self.record(call, validate_call(call, tools) is None, o)
        return StepResult(obs, done=self.reply is not None)

    def opening(self, task: Task) -> list[Message]:
        """The system prompt (if any), then the task's instruction as the user message."""
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    # ---- hooks ---------------------------------------------------------------------------

    def check(self, task: Task) -> None:
        """Raise ValueError naming what `task` lacks for this environment."""

    def start(self, task: Task) -> list[Message]:
        """Open the episode's resources, set `tools`; returns the opening messages."""
        return self.opening(task)

    def call_tool(self, call: ToolCall, tools: dict[str, Tool]) -> Message:
        """The observation of one tool call."""
        return execute_call(call, tools)

    def record(self, call: ToolCall, valid: bool, observation: Message) -> None:
        """Keep what `verify` needs of one call."""

    def finish(self, message: Message) -> StepResult:
        """A message without tool calls: keep its text as `reply` and end the episode."""
        self.reply = message.content
        return StepResult([], True)

    def verify(self) -> Reward:
        raise NotImplementedError(f"{type(self).__name__} does not implement verify()")

    def close(self) -> None:
        if self.sb is not None:
            self.sb.close()
            self.sb = None
