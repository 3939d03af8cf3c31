"""`reasoning_gym:<dataset>?n=N&seed=S`: procedurally generated reasoning tasks, scored by the
dataset's own `score_answer`.

The items are `reasoning_gym.create_dataset(dataset, size=n, seed=seed)` (n defaults to
`DEFAULT_N`, seed to 0), built by the same loader as the `reasoning_gym:` RL source
(`arcforge.data.reasoning_gym`), so the question a model is scored on reads exactly as the one it
trains on: the dataset's question plus the source's answer-line hint, as one user message. The
reply's visible content goes through the RL reward for these tasks
(`arcforge.rewards.registry`: the final `Answer:` line extracted, then the dataset's scorer).

Baseline: `majority_answer`, the most common true answer among the drawn items given to every
item, scored by the same scorer.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from arcforge.data.reasoning_gym import load_reasoning_gym, reasoning_gym_reward
from arcforge.errors import UserError
from arcforge.eval.external.base import ItemResult, Responder, SuiteResult, SuiteSpec, register
from arcforge.rewards.registry import reward_fn_for

DEFAULT_N = 200


class ReasoningGymSuite:
    """One reasoning_gym dataset, `n` items generated with `seed`."""

    def __init__(self, spec: SuiteSpec):
        if spec.options:
            raise UserError(
                f"external suite {spec.name}: unknown option(s) {sorted(spec.options)}; "
                "known: n, seed"
            )
        self.spec = spec
        self.n = spec.n or DEFAULT_N
        # the loader names an unknown dataset (a UserError) before any item is asked
        self.records = load_reasoning_gym(
            f"reasoning_gym:{spec.arg}:test", size=self.n, seed=spec.seed
        )

    def contamination_items(self) -> list[dict[str, Any]]:
        """The generated items as the contamination check reads them (question, answer)."""
        return [
            {
                "id": f"{self.spec.arg}-{self.spec.seed}-{i}",
                "prompt": r.task.instruction,
                "reference": r.task.validation.answer or "",
            }
            for i, r in enumerate(self.records)
        ]

    def run(self, responder: Responder, baselines: bool = True) -> SuiteResult:
        from importlib.metadata import version

        t0 = time.time()
        items = []
        requests = [([{"role": "user", "content": r.task.instruction}], None) for r in self.records]
        many = getattr(responder, "respond_many", None)
        try:  # a batching responder answers every item in one call
            replies: list[Any] = list(many(requests)) if many else [None] * len(requests)
        except Exception:
            replies = [None] * len(requests)
        for i, rec in enumerate(self.records):
            task = rec.task
            try:
                msg = replies[i] if replies[i] is not None else responder(*requests[i])
                reply = msg.get("content") or ""
                reward = reward_fn_for(task)(reply, task)
                detail = {"answer": reward.details.get("answer"), "truth": task.validation.answer}
                score = float(reward.score)
            except Exception as e:  # a failing responder fails its item, not the run
                score, detail = 0.0, {"error": f"{type(e).__name__}: {e}"}
            items.append(ItemResult(f"{self.spec.arg}-{self.spec.seed}-{i}", score, detail))
        result = SuiteResult(
            self.spec.name,
            items,
            meta={
                "benchmark": "reasoning_gym",
                "reasoning_gym_version": version("reasoning-gym"),
                "dataset": self.spec.arg,
                "n": self.n,
                "seed": self.spec.seed,
                "wall_s": round(time.time() - t0, 2),
            },
        )
        if baselines:
            result.baselines["majority_answer"] = self.majority_baseline()
        return result

    def majority_baseline(self) -> float:
        answers = Counter(r.task.validation.answer for r in self.records)
        majority = answers.most_common(1)[0][0]
        scores = [reasoning_gym_reward(majority, r.task).score for r in self.records]
        return sum(scores) / len(scores)


@register("reasoning_gym")
def open_reasoning_gym(spec: SuiteSpec) -> ReasoningGymSuite:
    return ReasoningGymSuite(spec)
