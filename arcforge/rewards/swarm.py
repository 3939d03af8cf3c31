"""The agent-swarm reward (the shape of Kimi K2.5's PARL reward) and its latency measure.

    r = r_task + lambda1 * r_parallel + lambda2 * r_finish

- r_task: the share of the wide task's items answered right (`score_list`: the answer as a
  list, compared item by item after normalization); "solved" is every item right.
- r_parallel: the parallelism term, the mean number of subagent episodes per parallel stage
  over the most a stage may hold (`max_parallel`; at most 1; 0 with no stage). Without it an
  orchestrator that is not yet good at delegating collapses to doing everything itself, or to
  one sub-task per turn (serial collapse).
- r_finish: the share of assigned sub-tasks whose subagent episode finished with an answer
  (0 when nothing was assigned). It keeps the orchestrator from spawning subagents that run
  out of turns or do nothing useful (spurious parallelism), which r_parallel alone pays for.
- lambda1, lambda2 fall linearly from their initial values to 0 over `anneal_steps` training
  steps (`ParlReward.weights`): the auxiliary terms shape early exploration, and the final
  policy is optimised for task success alone.

Latency is counted in critical steps (`critical_steps`): the orchestrator's steps plus, per
parallel stage (the assignments of one orchestrator turn, which run concurrently), the steps
of that stage's longest subagent episode. A single agent's critical steps are its turns.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LIST_SEPARATOR = "; "


def _normalize(s: str) -> str:
    """Lowercase, no punctuation, no articles, squashed spaces (SQuAD's normalization)."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def split_list(text: str) -> list[str]:
    """The items of a list answer: split on ";" when it has one, else on "," or new lines."""
    text = re.sub(r"^\s*answer\s*:\s*", "", text.strip(), flags=re.IGNORECASE)
    for sep in (";", ",", "\n"):
        if sep in text:
            return [p.strip() for p in text.split(sep) if p.strip()]
    return [text.strip()] if text.strip() else []


def score_list(answer: str | None, reference: Sequence[str]) -> tuple[float, bool]:
    """(share of reference items matched at their position, all matched with no extra item)."""
    if not reference:
        raise ValueError("score_list needs a non-empty reference list")
    pred = split_list(answer or "")
    hits = sum(
        i < len(pred) and _normalize(pred[i]) == _normalize(ref) for i, ref in enumerate(reference)
    )
    return hits / len(reference), hits == len(reference) and len(pred) == len(reference)


@dataclass(frozen=True)
class ParlReward:
    """r = r_task + lambda1 * r_parallel + lambda2 * r_finish with linearly annealed lambdas.

    lambda1, lambda2: the weights at step 0. anneal_steps: the step at which both reach 0.
    """

    lambda1: float = 0.1
    lambda2: float = 0.1
    anneal_steps: int = 100

    def __post_init__(self) -> None:
        if self.lambda1 < 0 or self.lambda2 < 0:
            raise ValueError(
                f"lambda1 and lambda2 must be >= 0, got {self.lambda1}, {self.lambda2}"
            )
        if self.anneal_steps < 1:
            raise ValueError(f"anneal_steps must be >= 1, got {self.anneal_steps}")

    def weights(self, step: int) -> tuple[float, float]:
        """(lambda1, lambda2) at training step `step`: lambda * max(0, 1 - step / anneal_steps)."""
        frac = max(0.0, 1.0 - max(0, step) / self.anneal_steps)
        return self.lambda1 * frac, self.lambda2 * frac

    def __call__(
        self, r_task: float, r_parallel: float, r_finish: float, step: int
    ) -> dict[str, float]:
        """The reward and every term, for logging."""
        l1, l2 = self.weights(step)
        return {
            "reward": r_task + l1 * r_parallel + l2 * r_finish,
            "r_task": r_task,
            "r_parallel": r_parallel,
            "r_finish": r_finish,
            "lambda1": l1,
            "lambda2": l2,
            "step": step,
        }


def parallel_term(stage_widths: Sequence[int], max_parallel: int) -> float:
    """r_parallel: mean subagent episodes per stage / max_parallel, at most 1 (0: no stage)."""
    if not stage_widths:
        return 0.0
    return min(1.0, sum(stage_widths) / len(stage_widths) / max(1, max_parallel))


def finish_term(finished: Sequence[bool]) -> float:
    """r_finish: the share of assigned sub-tasks that finished with an answer (0 if none)."""
    return sum(map(bool, finished)) / len(finished) if finished else 0.0


def critical_steps(orchestrator_steps: int, stages: Sequence[Sequence[int]]) -> int:
    """The orchestrator's steps plus, per parallel stage, its longest subagent's steps.

    Args:
        orchestrator_steps: the orchestrator's assistant turns.
        stages: per stage (one orchestrator turn's assignments), each subagent's steps.
    """
    return orchestrator_steps + sum(max(s) for s in stages if s)


def episode_critical_steps(details: dict[str, Any]) -> int:
    """Critical steps of a finished episode from its reward_details: the agent loop's turns
    (`details["agent"]["turns"]`) plus, for a swarm episode, each stage's longest subagent
    (`details["swarm"]["stage_steps"]`)."""
    turns = int(details.get("agent", {}).get("turns", 0))
    swarm = details.get("swarm")
    stages = [[int(x)] for x in swarm.get("stage_steps", [])] if isinstance(swarm, dict) else []
    return critical_steps(turns, stages)


def swarm_stats(details: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Batch means of the swarm terms for a metrics row: swarm_<term> over the trajectories
    whose reward_details carry a "swarm" record (none: an empty dict)."""
    swarm = [d for d in details if isinstance(d.get("swarm"), dict)]
    if not swarm:
        return {}
    keys = ("r_task", "r_parallel", "r_finish", "lambda1", "lambda2", "subagents", "assignments")
    out = {
        f"swarm_{k}": sum(float(d["swarm"].get(k, 0.0)) for d in swarm) / len(swarm) for k in keys
    }
    out["swarm_critical_steps"] = sum(map(episode_critical_steps, swarm)) / len(swarm)
    return out
