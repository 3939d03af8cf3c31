"""`reasoning_gym:<name>[:<split>]` sources: procedural reasoning datasets scored by their own scorer.

reasoning_gym (PyPI `reasoning-gym`) generates question/answer entries per dataset name
(`chain_sum`, `basic_arithmetic`, `letter_counting`, ...); each dataset has a `score_answer(answer,
entry)` that knows its own answer format. A record here is a prompt/answer `Record` whose Task
carries the entry and `metadata["scorer"] = "reasoning_gym"`, so `arcforge.rewards.registry`
routes its reward to that scorer instead of our math checker.

Deliberate simplifications: the train and test splits are the same generator with different
seeds (`SPLITS`), so an identical question can in principle appear in both; the entry lives in
memory only (Task.metadata), the dataset's config is its default.
"""

from __future__ import annotations

from functools import cache

from arcforge.data.sources import DataError, Record
from arcforge.types import Reward, Task, Validation

PREFIX = "reasoning_gym:"
SPLITS = {"train": (0, 2000), "test": (10_007, 200)}  # split -> (seed, size)
ANSWER_HINT = "\nEnd your reply with a line 'Answer: <answer>'."


def is_reasoning_gym(spec: str) -> bool:
    return spec.startswith(PREFIX)


def _module():
    try:
        import reasoning_gym
    except ImportError:
        raise DataError(
            "reasoning_gym sources need the reasoning-gym package: pip install 'arcforge[gym]'"
        ) from None
    return reasoning_gym


def load_reasoning_gym(spec: str, size: int | None = None, seed: int | None = None) -> list[Record]:
    """Records of `reasoning_gym:<name>[:train|test]` (default split: train).

    Args:
        size, seed: override the split's defaults from `SPLITS`.
    """
    name, _, split = spec.removeprefix(PREFIX).partition(":")
    split = split or "train"
    if split not in SPLITS:
        raise DataError(f"source {spec!r}: split must be one of {sorted(SPLITS)}")
    rg = _module()
    known = sorted(rg.factory.DATASETS)
    if name not in known:
        raise DataError(
            f"source {spec!r}: unknown reasoning_gym dataset {name!r} "
            f"(e.g. {', '.join(known[:8])}, ...)"
        )
    d_seed, d_size = SPLITS[split]
    ds = rg.create_dataset(name, size=size or d_size, seed=d_seed if seed is None else seed)
    out = []
    for i, entry in enumerate(ds):
        task = Task(
            id=f"rg-{name}-{split}-{i}",
            kind="math",
            instruction=entry["question"] + ANSWER_HINT,
            validation=Validation(answer=str(entry["answer"])),
            source=f"{PREFIX}{name}",
            split=split,
            metadata={"scorer": "reasoning_gym", "rg_dataset": name, "rg_entry": entry},
        )
        out.append(
            Record(
                prompt=task.instruction,
                answer=task.validation.answer,
                origin=f"{PREFIX}{name}:{split}#{i}",
                task=task,
            )
        )
    return out


@cache
def _scorer(name: str):
    return _module().get_score_answer_fn(name)


def reasoning_gym_reward(answer: str, task: Task) -> Reward:
    """Score an extracted final answer with the task's reasoning_gym dataset scorer.

    Returns:
        Reward(score in [0, 1] as the dataset's scorer gives it, details with the dataset).
    """
    name, entry = task.metadata["rg_dataset"], task.metadata["rg_entry"]
    score = float(_scorer(name)(answer, entry) or 0.0)
    return Reward(score, {"dataset": name, "answer": answer})
