"""The hybrid reward of general RL: rules as hard gates, then weighted rule, ORM and GRM scores.

GLM-5 mixes three signals because each fails differently: rules are exact but cover little,
an ORM (`arcforge.rewards.orm`) is low-variance but hackable, a GRM (`arcforge.rewards.grm`)
is harder to exploit but noisy. Per reply:

    gates     `rule_reward`'s gates (format, required, forbidden, json); any failure gives
              `gate_value` and the models are not even asked
    rule      the constraint fraction in [0, 1]
    orm, grm  model scores in [0, 1] (ORM: σ of its centred raw score; GRM: (mean − 1) / 9)
    length    hacking guard: both model scores are multiplied by
              length_factor = min(1, ((1 + tol) · ref / n) ^ α), n = reply words, ref = the
              reference length (metadata ref_words, else the task's scripted solution / anchor
              answer), because learned judges tend to reward longer replies
    score     Σ_i w_i x_i / Σ_i w_i over the signals present (a GRM that gave no parsable
              score drops out for that reply, its weight with it)
    disagree  |orm − grm| > disagree_threshold is flagged in the details and counted; with
              on_disagree="min" both model terms then use the lower of the two

Routing: the task's route key is metadata["reward_route"], else for chat tasks its rubric
category (writing, translation, roleplay, qa, text_processing, empathy), else its kind;
`routes[key]` may override the gates and weights, e.g. more judge weight for empathy, where
rules check little.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from arcforge.config import Strict
from arcforge.rewards.rubrics import category_of
from arcforge.rewards.rules import GATES, rule_reward
from arcforge.types import Reward, Task


def _known_gates(v: list[str] | None) -> list[str] | None:
    bad = sorted(set(v or []) - set(GATES))
    if bad:
        raise ValueError(f"unknown gate(s) {bad}; known: {list(GATES)}")
    return v


class RouteCfg(Strict):
    """Overrides for one route (None keeps the default)."""

    gates: list[str] | None = None
    w_rule: float | None = Field(None, ge=0)
    w_orm: float | None = Field(None, ge=0)
    w_grm: float | None = Field(None, ge=0)

    _gates = field_validator("gates")(_known_gates)


class HybridCfg(Strict):
    """Weights, gates, routing and hacking guards of the hybrid reward."""

    gates: list[str] = list(GATES)
    w_rule: float = Field(1.0, ge=0)
    w_orm: float = Field(0.5, ge=0)
    w_grm: float = Field(0.5, ge=0)
    gate_value: float = 0.0
    routes: dict[str, RouteCfg] = {}
    length_tolerance: float = Field(0.5, ge=0)
    length_alpha: float = Field(1.0, ge=0)
    disagree_threshold: float = Field(0.5, gt=0, le=1)
    on_disagree: Literal["flag", "min"] = "flag"

    _gates = field_validator("gates")(_known_gates)


def length_factor(n_words: int, ref_words: int | None, tolerance: float, alpha: float) -> float:
    """min(1, ((1 + tolerance) · ref / n) ^ alpha); 1.0 without a reference or an empty reply."""
    if not ref_words or n_words <= 0:
        return 1.0
    return min(1.0, ((1.0 + tolerance) * ref_words / n_words) ** alpha)


def disagreement(orm: float | None, grm: float | None, threshold: float) -> bool:
    """True when both model scores exist and differ by more than `threshold`."""
    if orm is None or grm is None or math.isnan(grm):
        return False
    return abs(orm - grm) > threshold


def combine(
    rule: float,
    orm: float | None,
    grm: float | None,
    weights: tuple[float, float, float],
    length: float = 1.0,
) -> float:
    """Σ w·x / Σ w over the present signals; model signals scaled by the length factor."""
    terms = [(weights[0], rule)]
    if orm is not None:
        terms.append((weights[1], orm * length))
    if grm is not None and not math.isnan(grm):
        terms.append((weights[2], grm * length))
    total = sum(w for w, _ in terms)
    return sum(w * x for w, x in terms) / total if total > 0 else rule


def reference_words(task: Task) -> int | None:
    """The reference reply length in words: metadata ref_words, else the solution's, else None."""
    if task.metadata.get("ref_words"):
        return int(task.metadata["ref_words"])
    sol = task.metadata.get("solution") or task.metadata.get("anchor")
    return len(str(sol).split()) if sol else None


class HybridReward:
    """Scores batches of replies; keeps running counts of gates, disagreements and failures.

    Args:
        cfg: weights, gates, routes, guards.
        orm: a trained `RewardModel` (None: no ORM term).
        grm: a `GenerativeRM` (None: no GRM term).
    """

    def __init__(self, cfg: HybridCfg, orm: Any = None, grm: Any = None) -> None:
        self.cfg, self.orm, self.grm = cfg, orm, grm
        self.counts: Counter[str] = Counter()

    def route(self, task: Task) -> tuple[str, list[str], tuple[float, float, float]]:
        """(route key, gates, (w_rule, w_orm, w_grm)) for a task."""
        key = task.metadata.get("reward_route") or (
            category_of(task) if task.kind == "chat" else task.kind
        )
        r = self.cfg.routes.get(key, RouteCfg())
        c = self.cfg
        pick = lambda v, d: d if v is None else v  # noqa: E731
        w = (pick(r.w_rule, c.w_rule), pick(r.w_orm, c.w_orm), pick(r.w_grm, c.w_grm))
        return key, pick(r.gates, c.gates), w

    def score_batch(
        self,
        tasks: Sequence[Task],
        replies: Sequence[str],
        parse_errors: Sequence[Sequence[str]] | None = None,
        n_tool_calls: Sequence[int] | None = None,
    ) -> list[Reward]:
        """Hybrid rewards of `replies` (visible content) to `tasks`, index-aligned."""
        n = len(tasks)
        errs = parse_errors or [()] * n
        calls = n_tool_calls or [0] * n
        routes = [self.route(t) for t in tasks]
        rules = [
            rule_reward(r, t, gates=g, parse_errors=e, n_tool_calls=k)
            for t, r, (_, g, _), e, k in zip(tasks, replies, routes, errs, calls)
        ]
        live = [i for i in range(n) if not rules[i].details["gate_failed"]]
        orm = self._orm_scores(tasks, replies, [i for i in live if routes[i][2][1] > 0])
        grm = self._grm_scores(tasks, replies, [i for i in live if routes[i][2][2] > 0])
        return [self._one(i, tasks[i], replies[i], routes[i], rules[i], orm, grm) for i in range(n)]

    def _orm_scores(self, tasks, replies, idx: list[int]) -> dict[int, float]:
        if self.orm is None or not idx:
            return {}
        raw = self.orm.score([tasks[i].instruction for i in idx], [replies[i] for i in idx])
        return {i: self.orm.normalize(r) for i, r in zip(idx, raw)}

    def _grm_scores(self, tasks, replies, idx: list[int]) -> dict[int, Reward]:
        if self.grm is None or not idx:
            return {}
        got = self.grm.score_batch([tasks[i] for i in idx], [replies[i] for i in idx])
        return dict(zip(idx, got))

    def _one(self, i, task, reply, route, rule: Reward, orm: dict, grm: dict) -> Reward:
        key, _, w = route
        self.counts["scored"] += 1
        details: dict[str, Any] = {"route": key, "rule": rule.score, "rule_details": rule.details}
        if rule.details["gate_failed"]:
            self.counts["gated"] += 1
            return Reward(self.cfg.gate_value, {**details, "gated": rule.details["gate_failed"]})
        o = orm.get(i)
        g_rew = grm.get(i)
        g = g_rew.score if g_rew is not None else None
        if g_rew is not None and math.isnan(g_rew.score):
            self.counts["grm_failed"] += 1
        lf = length_factor(
            len(reply.split()),
            reference_words(task),
            self.cfg.length_tolerance,
            self.cfg.length_alpha,
        )
        flag = disagreement(o, g, self.cfg.disagree_threshold)
        if flag:
            self.counts["disagree"] += 1
            if self.cfg.on_disagree == "min":
                o = g = min(o, g)  # type: ignore[type-var]
        score = combine(rule.score, o, g, w, lf)
        details.update(orm=o, grm=g, length_factor=lf, disagree=flag, weights=list(w))
        if g_rew is not None:
            details["grm_details"] = g_rew.details
        return Reward(score, details)
