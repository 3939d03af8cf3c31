"""Generative reward model (GRM): an LLM judge behind any OpenAI-compatible endpoint.

The judge gets the task's rubric (`arcforge.rewards.rubrics`: GLM-5's three dimensions plus the
task category's quality question), the instruction and the reply, and writes a reason and a
"Score: N" line (1-10). Judges are noisy (GLM-5: GRMs are harder to exploit but have higher
variance), so each reply is judged k times (different seeds, temperature > 0) and the parsed
scores are averaged; a reply the judge answers without a parsable score is re-asked up to
`retries` times. HTTP failures (connection errors, 429, 5xx) are retried inside `LLMClient`.
A reply for which no sample parsed gets score NaN and an error in its details: the hybrid
reward then drops the GRM term for it rather than inventing a number.

`parse_score` is robust to the text around the score: <think> blocks are dropped, then the last
`"score": N` (JSON), else the last "Score: N" / "Rating: N" (optionally "/10"), else the last
"N/10", else a bare number on the last line; anything outside [lo, hi] counts as unparsable.
"""

from __future__ import annotations

import math
import re
import statistics
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from arcforge.llm import LLMClient
from arcforge.rewards.rubrics import category_of, rubric_for
from arcforge.types import Reward, Task

_NUM = r"(-?\d+(?:\.\d+)?)"
_PATTERNS = [
    re.compile(r'"score"\s*:\s*"?' + _NUM, re.I),
    re.compile(r"\b(?:score|rating|grade)\s*(?:is|=|:)?\s*\**\s*" + _NUM + r"(?:\s*/\s*10)?", re.I),
    re.compile(_NUM + r"\s*/\s*10\b"),
]
_THINK = re.compile(r"<think>.*?</think>", re.S)


def parse_score(text: str, lo: float = 1.0, hi: float = 10.0) -> float | None:
    """The judge's score in `text`, or None when there is none in [lo, hi]."""
    t = _THINK.sub("", text or "")
    t = t.rsplit("</think>", 1)[-1]
    for pat in _PATTERNS:
        hits = pat.findall(t)
        if hits:
            v = float(hits[-1])
            return v if lo <= v <= hi else None
    lines = [ln.strip(" *.#`") for ln in t.strip().splitlines() if ln.strip()]
    if lines and re.fullmatch(_NUM, lines[-1]):
        v = float(lines[-1])
        return v if lo <= v <= hi else None
    return None


def judge_messages(task: Task, reply: str, rubric: str) -> list[dict[str, str]]:
    """The judge conversation: rubric as the system message, instruction + reply as the user's."""
    user = (
        f"Instruction given to the assistant:\n{task.instruction}\n\n"
        f"The assistant's reply:\n{reply}\n\nJudge the reply."
    )
    return [{"role": "system", "content": rubric}, {"role": "user", "content": user}]


class GenerativeRM:
    """LLM-as-judge reward: mean of k parsed 1-10 scores, mapped to [0, 1].

    Args:
        client: the judge endpoint.
        k: judge samples per reply (averaged).
        retries: re-asks per sample when the reply has no parsable score.
        temperature / max_tokens: judge sampling.
        seed: base seed (sample i, attempt a uses seed + 1000 i + a).
        workers: replies judged in parallel threads.
        lo / hi: the score scale the rubric asks for.
    """

    def __init__(
        self,
        client: LLMClient,
        k: int = 3,
        retries: int = 2,
        temperature: float = 0.7,
        max_tokens: int = 256,
        seed: int = 0,
        workers: int = 4,
        lo: float = 1.0,
        hi: float = 10.0,
    ) -> None:
        if k < 1:
            raise ValueError(f"GRM k must be >= 1, got {k}")
        self.client, self.k, self.retries = client, k, retries
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.workers, self.lo, self.hi = workers, lo, hi

    def _sample(self, msgs: list[dict[str, str]], i: int) -> tuple[float | None, int, str]:
        """(score or None, unparsable replies, last text) for judge sample i."""
        bad, text = 0, ""
        for a in range(self.retries + 1):
            text = self.client.chat(
                msgs,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=self.seed + 1000 * i + a,
            )[0]
            s = parse_score(text, self.lo, self.hi)
            if s is not None:
                return s, bad, text
            bad += 1
        return None, bad, text

    def score(self, task: Task, reply: str) -> Reward:
        """Judge one reply k times; Reward(mean normalized score or NaN, details)."""
        msgs = judge_messages(task, reply, rubric_for(task))
        got = [self._sample(msgs, i) for i in range(self.k)]
        raw = [s for s, _, _ in got if s is not None]
        details: dict[str, Any] = {
            "category": category_of(task),
            "samples": raw,
            "unparsable": sum(b for _, b, _ in got),
            "std": statistics.pstdev(raw) if len(raw) > 1 else 0.0,
        }
        if not raw:
            details["error"] = (
                f"no parsable score in {self.k} judge samples; last: {got[-1][2][:200]!r}"
            )
            return Reward(math.nan, details)
        mean = statistics.fmean(raw)
        details["mean_raw"] = mean
        return Reward((mean - self.lo) / (self.hi - self.lo), details)

    def score_batch(self, tasks: list[Task], replies: list[str]) -> list[Reward]:
        """`score` over many replies, `workers` at a time (the judge is I/O bound)."""
        if self.workers <= 1 or len(tasks) <= 1:
            return [self.score(t, r) for t, r in zip(tasks, replies)]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self.score, tasks, replies))
