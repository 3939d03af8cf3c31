"""The slide expert's self-improving loop: dynamic sampling, best-of-N, masked correction.

GLM-5 trains its slide generator with the three-level slide reward and then distils its best
pages back into training data:

- dynamic sampling (RL): a prompt whose samples all score the same, or all near the maximum, is
  too simple (no advantage signal, nothing to learn) and is skipped, so compute goes to hard,
  layout-heavy pages. The equal-rewards part is `rl.advantages.dynamic_sampling_mask`.
- best-of-N rejection sampling (data): of N decks for a task keep the single best, and only if
  it clears a quality bar.
- masked correction (data): a deck whose slide 3 of 10 broke is not thrown away; the broken
  slides' text spans get loss mask 0 and the good ones are kept. `slide_spans` locates each
  `<section class="slide">` in the reply, `token_loss_mask` turns the kept/masked decision into
  a per-token mask through a fast tokenizer's offset mapping.

`curate_decks` chains them over tasks (skipping tasks whose every sample is near the maximum) with a caller-given sampler (a local engine, an
OpenAI-compatible endpoint, or scripted decks in tests). Simplification: the SFT stage reads
whole-message masks, so `masked_spans` travel in the exported record for a span-aware loader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import torch

from arcforge.progress import progress
from arcforge.rewards.slides import deck_reward, slide_scores
from arcforge.rewards.slides_render import SlideRenderer
from arcforge.rl.advantages import dynamic_sampling_mask
from arcforge.types import Reward, Task


def skip_simple(
    group_scores: list[list[float]], near_max: float = 0.95, eps: float = 1e-6
) -> list[bool]:
    """Dynamic sampling: keep[g] is False when group g carries no signal or is too simple.

    Args:
        group_scores: per prompt, the rewards of its samples (equal group sizes).
        near_max: a group whose every sample scores at least this is too simple.
        eps: scores are rounded to this before the all-equal test.
    """
    if not group_scores:
        return []
    g = len(group_scores[0])
    if any(len(s) != g for s in group_scores):
        raise ValueError("skip_simple needs groups of equal size")
    r = torch.tensor(group_scores, dtype=torch.float64)  # (P, G)
    rounded = torch.round(r / eps) * eps  # (P, G)
    varied = dynamic_sampling_mask(rounded.reshape(-1), g).view(-1, g)[:, 0]  # (P,)
    easy = (r >= near_max).all(dim=1)  # (P,)
    return (varied & ~easy).tolist()


@dataclass
class BestOfN:
    index: int | None  # the kept sample, None when none clears the bar
    scores: list[float]
    reason: str


def best_of_n(rewards: list[Reward], min_score: float = 0.8) -> BestOfN:
    """Keep the best-scoring sample if it reaches `min_score` (ties: the first)."""
    scores = [r.score for r in rewards]
    if not scores:
        return BestOfN(None, [], "no samples")
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    if scores[best] < min_score:
        return BestOfN(None, scores, f"best score {scores[best]:.3f} < {min_score}")
    return BestOfN(best, scores, f"sample {best} scored {scores[best]:.3f}")


class _SlideFinder(HTMLParser):
    """Character spans of top-level <section class="slide"> elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)
        self.text, self.spans, self.depth, self.start = text, [], 0, -1

    def _offset(self) -> int:
        line, col = self.getpos()
        return self.line_starts[line - 1] + col

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag != "section":
            return
        if self.depth == 0 and "slide" in (dict(attrs).get("class") or "").split():
            self.start, self.depth = self._offset(), 1
        elif self.depth:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self.depth:
            self.depth -= 1
            if self.depth == 0:
                end = self.text.find(">", self._offset()) + 1
                self.spans.append((self.start, end))


def slide_spans(reply: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each top-level slide section in `reply`, in order.
    A slide left unclosed runs to the end of the reply."""
    finder = _SlideFinder(reply)
    finder.feed(reply)
    finder.close()
    if finder.depth:
        finder.spans.append((finder.start, len(reply)))
    return finder.spans


@dataclass
class MaskedDeck:
    """The masked-correction decision for one sample."""

    use: bool  # False: drop the whole sample (nothing good, or slides could not be located)
    keep_slides: list[bool] = field(default_factory=list)
    masked_spans: list[tuple[int, int]] = field(default_factory=list)


def masked_correction(reply: str, reward: Reward, threshold: float = 0.7) -> MaskedDeck:
    """Keep the slides scoring >= threshold, mask the others' character spans.

    A sample is used when at least one slide is kept and every scored slide was located in the
    reply (otherwise the mask could hit the wrong text).
    """
    scores = slide_scores(reward)
    spans = slide_spans(reply)
    if not scores or len(spans) != len(scores):
        return MaskedDeck(False)
    keep = [s >= threshold for s in scores]
    masked = [sp for sp, k in zip(spans, keep) if not k]
    return MaskedDeck(any(keep), keep, masked)


def token_loss_mask(
    tokenizer: Any, text: str, masked_spans: list[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """Token ids of `text` and a 0/1 mask: 0 on every token overlapping a masked span.

    Args:
        tokenizer: a fast (offset-mapping capable) Hugging Face tokenizer.
    """
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    mask = []
    for a, b in enc["offset_mapping"]:
        hit = any(a < e and s < max(b, a + 1) for s, e in masked_spans)
        mask.append(0 if hit else 1)
    return list(enc["input_ids"]), mask


Sampler = Callable[[Task, int], list[str]]  # (task, n) -> n replies


def curate_decks(
    tasks: list[Task],
    sampler: Sampler,
    n: int,
    renderer: SlideRenderer | None = None,
    min_score: float = 0.8,
    near_max: float = 0.95,
    threshold: float = 0.7,
) -> tuple[list[dict], dict]:
    """Sample n decks per task, skip too-simple tasks, keep the best deck with its slide mask.

    Returns:
        (records, counts): one record per kept task, `{"messages": [user, assistant],
        "task_id", "score", "keep_slides", "masked_spans"}`; counts of tasks, samples,
        skipped_simple, rejected (best under min_score) and kept.
    """
    renderer = renderer or SlideRenderer()
    counts = {"tasks": len(tasks), "samples": 0, "skipped_simple": 0, "rejected": 0, "kept": 0}
    records: list[dict] = []
    with progress(len(tasks), "slides curate") as bar:
        for i, task in enumerate(tasks):
            _curate_one(
                task, sampler(task, n), renderer, counts, records, min_score, near_max, threshold
            )
            bar.update(i + 1, kept=counts["kept"])
    return records, counts


def _curate_one(
    task: Task,
    replies: list[str],
    renderer: SlideRenderer,
    counts: dict,
    records: list[dict],
    min_score: float,
    near_max: float,
    threshold: float,
) -> None:
    """Score one task's samples and append its record (if any) to `records`."""
    rewards = [deck_reward(r, task, renderer) for r in replies]
    counts["samples"] += len(replies)
    if rewards and all(r.score >= near_max for r in rewards):  # too simple to teach anything
        counts["skipped_simple"] += 1
        return
    pick = best_of_n(rewards, min_score)
    if pick.index is None:
        counts["rejected"] += 1
        return
    reply = replies[pick.index]
    masked = masked_correction(reply, rewards[pick.index], threshold)
    counts["kept"] += 1
    records.append(
        {
            "messages": [
                {"role": "user", "content": task.instruction},
                {"role": "assistant", "content": reply},
            ],
            "task_id": task.id,
            "score": round(pick.scores[pick.index], 4),
            "keep_slides": masked.keep_slides,
            "masked_spans": [list(s) for s in masked.masked_spans],
        }
    )
