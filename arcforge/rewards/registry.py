"""Reward functions by task kind: the one place an RL loop looks up how to score a reply.

A reward function is `(reply, task) -> Reward`, where `reply` is the assistant's visible
content (reasoning stripped by the caller; tool calls are environments' business). The task's
`metadata["scorer"]`, when set, picks the function; otherwise its `kind` does:

    math, tool, search  math-verify on the final "Answer: ..." (integers, fractions, LaTeX)
    code                the hidden unit tests in a sandbox with a time limit
    exact               normalized exact match of the final answer
    reasoning_gym       the reasoning_gym dataset's own scorer on the final answer
    slides              the HTML deck rendered in Chromium: static, runtime, visual levels

A reward of your own: `register_reward("sql", sql_reward)` before the run starts; tasks of kind
"sql" (or with `metadata["scorer"] = "sql"`) are then scored by `sql_reward(reply, task)`.
"""

from __future__ import annotations

from collections.abc import Callable

from arcforge.rewards.code import code_reward
from arcforge.rewards.math import exact_match, extract_answer, math_reward
from arcforge.types import Reward, Task

RewardFn = Callable[[str, Task], Reward]
CODE_TIME_LIMIT = 10.0  # seconds per test run


def _math(reply: str, task: Task) -> Reward:
    return Reward(math_reward(reply, task.validation.answer or ""), {"pred": extract_answer(reply)})


def _exact(reply: str, task: Task) -> Reward:
    return Reward(exact_match(reply, task.validation.answer or ""))


def _code(reply: str, task: Task) -> Reward:
    if not task.validation.tests:
        raise ValueError(f"code task {task.id!r} has no validation.tests")
    return code_reward(
        reply,
        task.validation.tests,
        time_limit=CODE_TIME_LIMIT,
        stub=task.context.get("stub"),
        entry_point=task.metadata.get("entry_point"),
    )


def _reasoning_gym(reply: str, task: Task) -> Reward:
    from arcforge.data.reasoning_gym import reasoning_gym_reward

    answer = extract_answer(reply)
    return reasoning_gym_reward(answer, task)


def _slides(reply: str, task: Task) -> Reward:
    from arcforge.rewards.slides import deck_reward  # renders in Chromium: imported on use

    return deck_reward(reply, task)


REWARDS: dict[str, RewardFn] = {
    "math": _math,
    "tool": _math,
    "search": _math,
    "code": _code,
    "exact": _exact,
    "reasoning_gym": _reasoning_gym,
    "slides": _slides,
}


def register_reward(name: str, fn: RewardFn) -> None:
    """Add or replace the reward function of a task kind or `metadata["scorer"]` name.

    Args:
        name: the kind or scorer name it serves.
        fn: `(reply, task) -> Reward`; `reply` is the assistant's visible content.
    """
    REWARDS[name] = fn


def reward_fn_for(task: Task) -> RewardFn:
    """The reward function for a task (its metadata scorer, else its kind)."""
    key = task.metadata.get("scorer") or task.kind
    if key not in REWARDS:
        raise ValueError(
            f"no reward function for task {task.id!r} ({key!r}); known: {sorted(REWARDS)}"
        )
    return REWARDS[key]


def score(reply: str, task: Task) -> Reward:
    """Score one reply to one task."""
    return reward_fn_for(task)(reply, task)
