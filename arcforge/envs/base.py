"""The Environment protocol and the tool-call executor every environment shares.

An environment is a small class: `reset(task)` gives the opening messages and sets `tools`,
`step(assistant_message)` executes the message's tool calls and returns observations,
`verify()` grades the episode into a `Reward`. Tool calls that are malformed, name an unknown
tool, have wrong argument types, or raise, become an error observation that tells the model what
was wrong — never an exception out of the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from arcforge.sandbox.types import Limits, Sandbox
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


def _check_args(call: ToolCall, tool: Tool) -> str | None:
    # Imported here: chat depends on types only, envs may use chat's validator.
    from arcforge.chat import validate_call

    return validate_call(call, {tool.name: tool})


def execute_call(
    call: ToolCall, tools: dict[str, Tool], max_chars: int = MAX_OBSERVATION_CHARS
) -> Message:
    """Run one tool call; any problem becomes an `error: ...` tool message."""
    tool = tools.get(call.name)
    if tool is None:
        text = f"error: unknown tool {call.name!r}; available tools: {', '.join(sorted(tools))}"
    elif (problem := _check_args(call, tool)) is not None:
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


class SingleTurnEnv:
    """An environment where the first assistant reply ends the episode (MathEnv, SlidesEnv).

    Subclasses implement `check(task)` (raise ValueError naming what the task lacks) and
    `score(reply, task)` (the Reward of a reply; `reply` is None when the episode ended
    without one, e.g. at the length or context limit).
    """

    def __init__(self, system_prompt: str | None = None) -> None:
        self.system_prompt = system_prompt
        self.tools: list[Tool] = []
        self._task: Task | None = None
        self._reply: str | None = None

    def check(self, task: Task) -> None:
        pass

    def score(self, reply: str | None, task: Task) -> Reward:
        raise NotImplementedError

    def reset(self, task: Task) -> list[Message]:
        self.check(task)
        self._task, self._reply = task, None
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        self._reply = message.content
        return StepResult(observations=[], done=True)

    def verify(self) -> Reward:
        if self._task is None:
            raise RuntimeError(f"{type(self).__name__}.verify called before reset")
        return self.score(self._reply, self._task)

    def close(self) -> None:
        pass


class SandboxToolEnv:
    """A multi-turn environment whose tools act in one sandbox per episode (CodeEnv, TIREnv,
    ChainEnv, SWEEnv, TerminalEnv): each assistant message's tool calls run and come back as
    observations; a message without calls ends the episode and is kept as `final`.

    Subclasses open `self.sb` and set `self.tools` in `reset`, and override `finish(message)`
    for what a final message does (run its scripts, grade a step); `close` releases the sandbox.
    State of their own per episode goes in `_new_episode`.

    Args:
        backend: sandbox backend.
        limits: per-exec limits (default: `Limits(wall_time=verify_timeout)`).
        tool_timeout: seconds per tool call.
        verify_timeout: seconds for grading.
    """

    def __init__(
        self,
        backend: str = "bwrap",
        limits: Limits | None = None,
        tool_timeout: float = 10,
        verify_timeout: float = 60,
    ) -> None:
        self.backend, self.limits = backend, limits or Limits(wall_time=verify_timeout)
        self.tool_timeout, self.verify_timeout = tool_timeout, verify_timeout
        self.sb: Sandbox | None = None
        self.task: Task | None = None
        self.tools: list[Tool] = []
        self.final = ""
        self._new_episode()

    def _new_episode(self) -> None:
        """Clear what a subclass keeps per episode beyond the task, sandbox and tools: called
        here, so that the fields exist before the first episode, and by the subclass's `reset`."""

    def step(self, message: Message) -> StepResult:
        if self.sb is None or self.task is None:
            raise RuntimeError("call reset(task) before step()")
        if message.tool_calls:
            return StepResult(execute_calls(message, {t.name: t for t in self.tools}), False)
        return self.finish(message)

    def finish(self, message: Message) -> StepResult:
        """A message without tool calls: keep its text and end the episode."""
        self.final = message.content
        return StepResult([], True)

    def close(self) -> None:
        if self.sb is not None:
            self.sb.close()
            self.sb = None
