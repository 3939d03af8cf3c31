"""A loaded checkpoint as the evaluation suites query it, and what a suite returns.

`Evaluator` holds the model, its tokenizer, a LocalEngine over it and the world, and answers
prompts and tasks greedily or with seeded samples; `SuiteOutput` is one suite's per-item
scores, examples and (agent suites) outcomes and episodes. `load_engine` / `load_evaluator`
open a checkpoint directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from arcforge.chat import ThinkingConfig, parse_assistant, render_ids
from arcforge.chat.formats import chat_format
from arcforge.chat.parse import ParsedAssistant
from arcforge.chat.tokens import END, EOS
from arcforge.errors import UserError
from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.prompts import stop_token_ids
from arcforge.types import Message, Task


@dataclass
class SuiteOutput:
    """One suite's result on one checkpoint: per-item scores and a few examples for the report."""

    scores: list[float]
    examples: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, int] | None = None  # agent suites: arcforge.eval.failures
    by_hops: dict[str, list[int]] | None = None  # tool/search: hop count -> [solved, n]
    clusters: list[str] | None = (
        None  # items sharing a reference solution (suites.solution_clusters)
    )
    episodes: list[dict[str, Any]] = field(default_factory=list)  # one record per episode


@dataclass
class Evaluator:
    """A loaded checkpoint plus what suites need to query it."""

    model: torch.nn.Module
    tokenizer: Any
    engine: LocalEngine
    world: Any

    def parse(self, text: str) -> ParsedAssistant:
        """A reply's reasoning, content and tool calls, in the checkpoint's chat format."""
        fmt = chat_format(self.tokenizer)
        return parse_assistant(strip_end(text)) if fmt.name == "arcforge" else fmt.parse(text)

    def complete(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        sampling: tuple[float, float, int, int] | None = None,
    ) -> list[str]:
        """Greedy completions, or with `sampling` = (temperature, top_p, k, seed) k seeded
        samples per prompt (prompt-major order)."""
        temp, top_p, k, seed = sampling or (0.0, 1.0, 1, None)
        params = SamplingParams(
            max_new_tokens=max_new_tokens,
            temperature=temp,
            top_p=top_p,
            n=k,
            seed=seed,
            stop_token_ids=stop_token_ids(self.tokenizer),
        )
        outs = self.engine.generate([self.fit(p, max_new_tokens) for p in prompts], params)
        return [self.tokenizer.decode(o.token_ids, skip_special_tokens=False) for o in outs]

    def chat(
        self,
        tasks: list[Task],
        max_new_tokens: int,
        with_tools: bool = False,
        thinking: bool = True,
        sampling: tuple[float, float, int, int] | None = None,
    ) -> list[str]:
        """Assistant replies (raw text with think/tool_call tags) to each task: greedy, or k
        per task with `sampling` (see `complete`)."""
        tools = self.world.tools()
        prompts = []
        for t in tasks:
            msgs = [Message(role="user", content=t.instruction, thinking=thinking)]
            tl = [tools[n] for n in t.tools if n in tools] if with_tools else None
            enc = render_ids(
                msgs,
                self.tokenizer,
                tools=tl,
                thinking=ThinkingConfig(),
                add_generation_prompt=True,
            )
            prompts.append(enc.input_ids)
        return self.complete(prompts, max_new_tokens, sampling)

    def fit(self, ids: list[int], max_new_tokens: int) -> list[int]:
        """Keep the last tokens that fit the model's context with room to answer."""
        limit = int(getattr(self.model.config, "max_position_embeddings", 2048)) - max_new_tokens
        return ids[-limit:]


def strip_end(text: str) -> str:
    """A reply without its end-of-turn and end-of-text markers."""
    return text.replace(END, "").replace(EOS, "").strip()


def load_engine(
    ckpt: Path, max_batch: int = 64, precision: str = "fp32"
) -> tuple[Any, Any, LocalEngine]:
    """(model, tokenizer, LocalEngine) of a checkpoint directory; a UserError when it is not one."""
    if not (ckpt / "config.json").exists():
        raise UserError(f"{ckpt} is not a checkpoint directory (no config.json)")
    model = load_model(ckpt).eval()
    tok, _ = load_tokenizer(ckpt)
    pad = tok.pad_token_id or 0
    return (
        model,
        tok,
        LocalEngine(model, pad_token_id=pad, max_batch=max_batch, precision=precision),
    )


def load_evaluator(
    ckpt: Path, world: Any, batch_size: int = 64, precision: str = "fp32"
) -> Evaluator:
    model, tok, engine = load_engine(ckpt, batch_size, precision)
    return Evaluator(model=model, tokenizer=tok, engine=engine, world=world)
