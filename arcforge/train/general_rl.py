"""General RL: the synchronous GRPO trainer of `arcforge.train.rl` driven by the
hybrid reward, with human-written anchor answers mixed into the batch.

Nothing of the RL loop is copied: `train_rl` takes a Scorer and an Engine, and general RL gives
it two components.

- `hybrid_scorer`: decodes each completion, parses it (think block, tool calls, parse errors)
  and scores the visible content with `HybridReward` (rule gates, rule score, ORM, GRM, length
  guard, disagreement flag). Each call's counts go to `reward.jsonl` next to metrics.jsonl.
- `AnchorEngine`: wraps the rollout engine. How anchors enter the batch and the loss: anchor
  tasks are ordinary prompts of the pool (a share `anchors.weight` of it). When a generate call
  contains an anchor prompt, the last of its group's G samples is replaced by the human answer,
  encoded exactly as the template renders an assistant reply (so it is a token sequence the
  policy could have sampled), with its logprobs recomputed under the current policy (the
  trainer's weights equal the engine's at rollout time, so IcePop's ρ is 1 and nothing is
  popped). The anchor is then scored by the same hybrid reward as the policy's samples and
  takes part in the group baseline: when it beats the samples (the usual case: it meets the
  constraints, is short and natural) it gets a positive advantage and the GRPO loss raises the
  likelihood of the human phrasing; the group's worse samples are pushed down relative to it.
  So an anchor is a reward-weighted, off-policy member of its group, not a separate SFT loss,
  and its pull fades by itself once the policy's own samples score as well.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import torch

from arcforge.chat.encoding import encode_spans
from arcforge.chat.formats import chat_format, scripted_reply
from arcforge.chat.template import assistant_spans
from arcforge.device import model_device
from arcforge.rewards.hybrid import HybridReward
from arcforge.rewards.rules import tool_call_reward
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import Completion, Engine, SamplingParams
from arcforge.rollout.prompts import RLPrompt, Scorer
from arcforge.types import Message, Tool


def hybrid_scorer(
    tokenizer: Any,
    hybrid: HybridReward,
    log_path: Path | None = None,
    tools: dict[str, Tool] | None = None,
) -> Scorer:
    """A `train_rl` Scorer: decode, parse, score with the hybrid reward, log the call's counts.

    With `tools`, a prompt whose task offers tools takes the tool route instead
    (`tool_call_reward`: a well-formed, schema-valid call = 1); the rest take the hybrid."""

    def scorer(prompts: list[RLPrompt], comps: list[Completion]) -> list:
        before = Counter(hybrid.counts)
        fmt = chat_format(tokenizer)
        parsed = [fmt.parse_ids(list(c.token_ids)) for c in comps]
        tasks = [p.task for p in prompts]
        routed = [i for i, t in enumerate(tasks) if tools is not None and t.tools]
        rest = sorted(set(range(len(tasks))) - set(routed))
        rewards: list = [None] * len(tasks)
        for i in routed:
            p = parsed[i]
            rewards[i] = tool_call_reward(tasks[i], p.tool_calls, p.errors, tools or {})
        scored = hybrid.score_batch(
            [tasks[i] for i in rest],
            [parsed[i].content for i in rest],
            [parsed[i].errors for i in rest],
            [len(parsed[i].tool_calls) for i in rest],
        )
        for i, r in zip(rest, scored):
            rewards[i] = r
        if log_path is not None:
            delta = {k: hybrid.counts[k] - before.get(k, 0) for k in hybrid.counts}
            row = {**delta, **_component_means(rewards), "tool_route": len(routed)}
            with log_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
        return rewards

    return scorer


def _component_means(rewards: list) -> dict[str, float]:
    out: dict[str, float] = {"reward_mean": sum(r.score for r in rewards) / max(1, len(rewards))}
    for key in ("rule", "orm", "grm"):
        vals = [r.details.get(key) for r in rewards if r.details.get(key) is not None]
        vals = [v for v in vals if v == v]  # drop NaN (a judge that gave no score)
        if vals:
            out[f"{key}_mean"] = sum(vals) / len(vals)
    return out


def anchor_reply_ids(tokenizer: Any, answer: str, thinking: bool) -> list[int]:
    """The token ids of `answer` as a sampled assistant reply (think block if on, <|end|>);
    in a checkpoint's native format, the template's text for the reply and its first stop id."""
    fmt = chat_format(tokenizer)
    if fmt.name == "native":
        text = scripted_reply(fmt, None, answer, [])
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) + fmt.stop_ids()[:1]
    spans = assistant_spans(Message("assistant", answer, reasoning=""), thinking)
    spans = spans[1 if thinking else 2 : -1]  # no header (in the prompt), no final newline
    return [t for ids in encode_spans(spans, tokenizer) for t in ids]


class AnchorEngine:
    """An Engine that puts human anchor answers into the groups of anchor prompts.

    Args:
        inner: the rollout engine doing the sampling.
        policy: the trainer's model (logprobs of anchor tokens are computed with it).
        anchors: prompt ids -> the anchor reply's token ids.
    """

    def __init__(
        self, inner: Engine, policy: torch.nn.Module, anchors: dict[tuple[int, ...], list[int]]
    ) -> None:
        self.inner, self.policy, self.anchors = inner, policy, anchors
        self.injected = 0

    @property
    def version(self) -> int:
        return self.inner.version

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        self.inner.load_weights(state_dict, version)

    @torch.no_grad()
    def _logprobs(self, prompt: list[int], reply: list[int]) -> list[float]:
        ids = torch.tensor([prompt + reply], device=model_device(self.policy))  # (1, P + R)
        logits = self.policy(input_ids=ids[:, :-1]).logits  # (1, P + R - 1, V)
        lp = token_logprobs(logits, ids[:, 1:])[0]  # (P + R - 1,)
        return lp[len(prompt) - 1 :].tolist()  # (R,) the reply tokens

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        comps = self.inner.generate(prompts, params)
        for j, p in enumerate(prompts):
            reply = self.anchors.get(tuple(p))
            if reply is None:
                continue
            ids = reply[: params.max_new_tokens]
            reason: Literal["stop", "length"] = "stop" if len(ids) == len(reply) else "length"
            comps[j * params.n + params.n - 1] = Completion(ids, self._logprobs(p, ids), reason)
            self.injected += 1
        return comps


def anchor_prompts(tokenizer: Any, tasks: list, thinking: bool) -> list[RLPrompt]:
    """Anchor tasks rendered as RL prompts (one user turn, like every other prompt)."""
    from arcforge.chat import render_ids

    out = []
    for t in tasks:
        msgs = [Message("user", t.instruction, thinking=thinking)]
        out.append(
            RLPrompt(list(render_ids(msgs, tokenizer, add_generation_prompt=True).input_ids), t)
        )
    return out


def mix_anchors(prompts: list[RLPrompt], anchors: list[RLPrompt], weight: float) -> list[RLPrompt]:
    """The pool with anchors repeated to make up about `weight` of it (at least once each)."""
    if not anchors or weight <= 0:
        return list(prompts)
    want = max(len(anchors), round(weight * len(prompts) / (1 - weight)))
    reps = [anchors[i % len(anchors)] for i in range(want)]
    return list(prompts) + reps
