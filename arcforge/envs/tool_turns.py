"""`ToolTurnsEnv`: the reset and step shared by environments where the model calls tools until
it replies without a tool call, and that reply is the answer `verify` scores.

A subclass sets `tools` and `system_prompt`, calls `_begin(task)` at the end of its `reset`,
records each call in `_record` and scores the episode in `verify`.
"""

from __future__ import annotations

from arcforge.chat.validate import validate_call
from arcforge.envs.base import StepResult, execute_calls
from arcforge.types import Message, Task, Tool, ToolCall


class ToolTurnsEnv:
    """Run tool calls as observations; the first message without tool calls ends the episode."""

    system_prompt: str | None
    tools: list[Tool]
    _task: Task | None = None
    _reply: str | None = None

    def _begin(self, task: Task) -> list[Message]:
        """Forget the last episode and return the opening messages (system prompt, task)."""
        self._task, self._reply = task, None
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    def _record(self, call: ToolCall, valid: bool, observation: Message) -> None:
        """Keep what `verify` needs of one call (`valid`: a known tool, arguments that match
        its schema; `observation`: what the call returned)."""

    def step(self, message: Message) -> StepResult:
        if not message.tool_calls:
            self._reply = message.content
            return StepResult([], done=True)
        by_name = {t.name: t for t in self.tools}
        obs = execute_calls(message, by_name)
        for call, o in zip(message.tool_calls, obs):
            self._record(call, validate_call(call, by_name) is None, o)
        return StepResult(obs, done=False)

    def close(self) -> None:
        pass
