"""A `Responder` backed by a checkpoint directory in this process: what `arcforge eval CKPT
--suites bfcl:...` scores when no `--endpoint` is given.

The request's OpenAI-shaped messages and tools are rendered in the checkpoint's own chat format
(arcforge.chat.formats: its Jinja template and tool-call dialect, or arcforge's format for a
model arcforge pretrained), sampled with the LocalEngine until a stop id, and the reply is
parsed by the same dialect into content, reasoning and OpenAI `tool_calls`. A reply the
dialect cannot read comes back as plain content (its parse errors under `arcforge_errors`),
never as an exception. `respond_many` answers a batch in one engine call (single-turn suites
use it when present).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arcforge.chat.formats import chat_format
from arcforge.eval.evaluator import load_engine
from arcforge.rollout.chat_serve import to_messages, to_tools
from arcforge.rollout.engines.base import SamplingParams


class CheckpointResponder:
    """`CheckpointResponder(Path("runs/demo/sft/checkpoint"), max_new_tokens=256)`.

    Args:
        checkpoint: a checkpoint directory (`save_pretrained` layout).
        max_new_tokens: the longest reply.
        temperature: 0 is greedy (the default: scores are then deterministic).
        batch_size: the engine's largest batch.
    """

    def __init__(
        self,
        checkpoint: str | Path,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        batch_size: int = 16,
        seed: int = 0,
    ) -> None:
        model, tok, engine = load_engine(Path(checkpoint), batch_size)
        self._init(model, tok, engine, max_new_tokens, temperature, seed)

    @classmethod
    def from_loaded(
        cls, model: Any, tokenizer: Any, engine: Any, max_new_tokens: int = 256, seed: int = 0
    ) -> CheckpointResponder:
        """A greedy responder over an already loaded model, tokenizer and engine."""
        self = cls.__new__(cls)
        self._init(model, tokenizer, engine, max_new_tokens, 0.0, seed)
        return self

    def _init(self, model, tokenizer, engine, max_new_tokens, temperature, seed) -> None:
        self.model, self.tokenizer, self.engine = model, tokenizer, engine
        self.fmt = chat_format(self.tokenizer)
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed
        self.context = int(getattr(self.model.config, "max_position_embeddings", 2048))

    def _prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None):
        msgs, tl = to_messages(messages), to_tools(tools)
        ids = self.fmt.prompt_ids(msgs, tl)
        return ids[-(self.context - self.max_new_tokens) :], tl

    def respond_many(
        self, requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]]
    ) -> list[dict[str, Any]]:
        prompts = [self._prompt(m, t) for m, t in requests]
        params = SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            stop_token_ids=tuple(self.fmt.stop_ids()),
            seed=self.seed,
        )
        outs = self.engine.generate([p for p, _ in prompts], params)
        return [self._reply(o.token_ids, tl) for o, (_, tl) in zip(outs, prompts)]

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return self.respond_many([(messages, tools)])[0]

    def _reply(self, ids: list[int], tools) -> dict[str, Any]:
        parsed = self.fmt.parse_ids(list(ids), tools)
        calls = [
            {
                "id": f"call_{j}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for j, c in enumerate(parsed.tool_calls)
        ]
        out: dict[str, Any] = {
            "role": "assistant",
            "content": parsed.content,
            "tool_calls": calls or None,
            "reasoning_content": parsed.reasoning,
        }
        if parsed.errors:
            out["arcforge_errors"] = list(parsed.errors)
        return out
