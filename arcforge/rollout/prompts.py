"""Prompts and stop ids: what every sampler (RL trainers, rejection sampling, eval) hands the
engine, and how it scores what comes back.

`prompt_from_record` renders a prompt/answer record as a one-user-turn chat prompt that keeps its
scoring Task; `stop_token_ids` are the ids a reply ends at in the tokenizer's chat format;
`text_scorer` scores each completion's visible content with the reward registry.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from arcforge.chat import render_ids
from arcforge.chat.formats import chat_format
from arcforge.data.sources import Record
from arcforge.rewards.registry import score as score_reply
from arcforge.rollout.engines.base import Completion
from arcforge.types import Message, Reward, Task, Tool, Validation


@dataclass
class RLPrompt:
    """One problem: the rendered prompt ids and the task that scores replies to it."""

    ids: list[int]
    task: Task | None = None


# (prompt of each sample, its completion) -> one Reward per sample
Scorer = Callable[[list[RLPrompt], list[Completion]], list[Reward]]


def prompt_from_record(
    record: Record, tokenizer: Any, thinking: bool = True, tools: dict[str, Tool] | None = None
) -> RLPrompt:
    """Render a prompt/answer record as a one-user-turn chat prompt with its scoring Task; with
    `tools`, the tools the task names are offered in the prompt (as the tool_format suite does)."""
    task = record.task or Task(
        record.origin, "math", record.prompt or "", validation=Validation(answer=record.answer)
    )
    msgs = [Message(role="user", content=task.instruction, thinking=thinking)]
    offered = [tools[n] for n in task.tools if n in tools] if tools else None
    ids = render_ids(msgs, tokenizer, tools=offered or None, add_generation_prompt=True).input_ids
    return RLPrompt(list(ids), task)


def stop_token_ids(tokenizer: Any) -> list[int]:
    """The ids that end a reply in the tokenizer's chat format (arcforge's: <|end|> and
    <|endoftext|>; a native checkpoint's: its generation config's eos ids and its dialect's end
    tokens)."""
    return [i for i in chat_format(tokenizer).stop_ids() if i is not None and i >= 0]


def text_scorer(tokenizer: Any, workers: int = 4) -> Scorer:
    """Decode each completion, keep the reply's visible content, score it with the reward
    registry (threads when the batch has code tasks: their tests run in subprocesses)."""

    def one(prompt: RLPrompt, comp: Completion) -> Reward:
        return score_reply(chat_format(tokenizer).parse_ids(comp.token_ids).content, prompt.task)

    def scorer(prompts: list[RLPrompt], comps: list[Completion]) -> list[Reward]:
        if any(p.task.kind == "code" for p in prompts):
            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(one, prompts, comps))
        return [one(p, c) for p, c in zip(prompts, comps)]

    return scorer
