"""ToolEnv: the world's `tool` suite (ABE-style tool use) as a multi-turn environment.

The model gets the task's tools (by default the world's lookup and calculator; any name in
`task.tools` must exist in the tool set given), calls them as often as it likes, and ends the
episode with a reply without tool calls. Reward: exact match (normalized) of that reply's
"Answer: ..." part against validation.answer. Details record the answer, the number of tool
calls, whether each was valid (a known tool with arguments matching its schema) and how many
observations were errors (invalid calls, or a valid call the tool itself rejected, such as an
unknown entity), and how many of the task's reference calls (`metadata["calls"]`, the oracle's
plan) the episode made: same tool, same arguments up to case and whitespace.

`call_credit` (default 0: the reward is the exact match and nothing else) is a process reward
for RL, the tool-call matching reward of ToolRL (Qian et al., 2025): an episode whose answer is
wrong scores `call_credit` x the share of the reference calls it made, so a group of sampled
episodes that all answer wrong still ranks the one that copied the question's entity into the
right lookup above the one that miscopied it (on a tiny model most tool groups are all wrong,
and half of the held-out failures are a miscopied name). A right answer scores 1 whatever its
calls. Evaluation keeps the default: suites report exact match.
"""

from __future__ import annotations

from arcforge.envs.base import Env
from arcforge.rewards.math import exact_match, extract_answer
from arcforge.types import Message, Reward, Task, Tool, ToolCall


class ToolEnv(Env):
    """Tool-use environment over a fixed set of tools (e.g. `world.tools()`).

    Args:
        tools: every tool this environment may offer, by name.
        system_prompt: an optional system message.
    """

    def __init__(
        self, tools: dict[str, Tool], system_prompt: str | None = None, call_credit: float = 0.0
    ) -> None:
        if not 0.0 <= call_credit < 1.0:
            raise ValueError(
                f"call_credit must be in [0, 1) (a right answer scores 1), got {call_credit}"
            )
        super().__init__(system_prompt)
        self.all_tools, self.call_credit = tools, call_credit
        self._calls: list[dict[str, object]] = []

    def check(self, task: Task) -> None:
        if task.validation.answer is None:
            raise ValueError(f"task {task.id}: ToolEnv needs validation.answer")
        missing = [n for n in task.tools if n not in self.all_tools]
        if missing:
            have = ", ".join(sorted(self.all_tools))
            raise ValueError(f"task {task.id} asks for tool(s) {missing}; this ToolEnv has {have}")

    def start(self, task: Task) -> list[Message]:
        self.tools = [self.all_tools[n] for n in task.tools or sorted(self.all_tools)]
        self._calls = []
        return self.opening(task)

    def record(self, call: ToolCall, valid: bool, observation: Message) -> None:
        self._calls.append(
            {
                "name": call.name,
                "valid": valid,
                "key": _call_key(call.name, call.arguments),
                "error": observation.content.startswith("error:"),
            }
        )

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("ToolEnv.verify called before reset")
        ref = str(self.task.validation.answer)
        score = exact_match(self.reply, ref) if self.reply is not None else 0.0
        answer = extract_answer(self.reply) if self.reply is not None else None
        plan = [_call_key(c["name"], c["arguments"]) for c in self.task.metadata.get("calls", [])]
        made = {c["key"] for c in self._calls}
        n_made = sum(k in made for k in plan)
        details = {
            "answer": answer,
            "n_tool_calls": len(self._calls),
            "calls_valid": [bool(c["valid"]) for c in self._calls],
            "n_errors": sum(bool(c["error"]) for c in self._calls),
            "solved": score,
            "reference_calls": len(plan),
            "reference_calls_made": n_made,
        }
        if score < 1.0 and plan and self.call_credit:
            score = self.call_credit * n_made / len(plan)
        return Reward(score, details)


def _call_key(name: str, arguments: object) -> tuple:
    """A call as (tool, sorted (argument, value) pairs), values lowercased without whitespace,
    so `2058 - 1944` and `2058-1944` are one calculator call; arguments that are not a dict
    (an invalid call) compare as their text."""
    if not isinstance(arguments, dict):
        return (name, "".join(str(arguments).split()).lower())
    return (
        name,
        tuple(sorted((str(k), "".join(str(v).split()).lower()) for k, v in arguments.items())),
    )
