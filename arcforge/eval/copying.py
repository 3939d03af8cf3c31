"""The `copy` suite: can a checkpoint copy a name from its context? Every agent suite needs it.

Each item puts a two-word name into an instruction-like template and asks the model, teacher
forced and greedy, for the name's next mention. There are three templates: "Mention the word
'X'", a question that repeats X, and a tool call's "entity" argument. Half the names are the
world's knowledge-base names (seen in pretraining), half fresh invented ones (never seen). An
item scores the fraction of the name's tokens predicted right; its details say whether the
first token and the whole name were. The demo model scores low here (first token
5-8%, whole name 0), which is why its agent suites stay at 0; README, "Teaching a tiny model to
copy", gives the options that raise it. `benchmarks/copy_probe.py` prints the same probe for
any checkpoints.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from arcforge.device import model_device
from arcforge.eval.evaluator import SuiteOutput

TEMPLATES = [
    "Write one sentence about {a}. Mention the word '{a}'. The word: '{b}",
    "{a} works for the guild. Where does {a} work? {b} works for the guild",
    'Look up {a}. <tool_call>{{"name": "lookup", "arguments": {{"entity": "{b}',
]


@dataclass(frozen=True)
class CopyItem:
    name: str
    template: str
    fresh: bool


@dataclass(frozen=True)
class CopyResult:
    item: CopyItem
    correct: list[bool]  # per token of the name's second mention

    @property
    def score(self) -> float:
        return sum(self.correct) / len(self.correct)


def probe_names(world: Any, n_fresh: int = 300) -> tuple[list[str], list[str]]:
    """(the world's two-word KB names, fresh names from a name bank the world never used)."""
    from arcforge.world.knowledge.names import NameBank

    kb = [e.name for e in world.kb.entities if len(e.name.split()) == 2]
    bank = NameBank(random.Random(1000))
    return kb, [bank.person() for _ in range(n_fresh)]


def copy_items(names: list[str], n: int, fresh: bool, seed: int = 0) -> list[CopyItem]:
    rng = random.Random(seed)
    return [CopyItem(rng.choice(names), rng.choice(TEMPLATES), fresh) for _ in range(n)]


@torch.inference_mode()
def score_copy(model: torch.nn.Module, tokenizer: Any, items: list[CopyItem]) -> list[CopyResult]:
    """Teacher-forced greedy predictions of each item's second mention of its name."""
    out = []
    for it in items:
        pre = tokenizer(it.template.format(a=it.name, b=""), add_special_tokens=False)["input_ids"]
        ids = tokenizer(it.template.format(a=it.name, b=it.name), add_special_tokens=False)[
            "input_ids"
        ]
        if ids[: len(pre)] != pre:  # the name merged with the character before it
            pre = pre[:-1]
        x = torch.tensor([ids], device=model_device(model))
        pred = model(input_ids=x).logits[0].argmax(-1).cpu()
        start = len(pre)
        out.append(
            CopyResult(
                it, [bool(pred[start - 1 + j] == ids[start + j]) for j in range(len(ids) - start)]
            )
        )
    return out


def summary(results: list[CopyResult]) -> dict[str, float]:
    """First-token and whole-name accuracy."""
    n = max(1, len(results))
    return {
        "first": sum(r.correct[0] for r in results) / n,
        "whole": sum(all(r.correct) for r in results) / n,
    }


def suite_copy(ev: Any, cfg: Any) -> SuiteOutput:
    n = cfg.n_for("copy")
    kb, fresh = probe_names(ev.world)
    items = copy_items(kb, n // 2, False, seed=cfg.seed) + copy_items(
        fresh, n - n // 2, True, seed=cfg.seed + 1
    )
    ev.model.eval()
    res = score_copy(ev.model, ev.tokenizer, items)
    examples = [
        {"names": kind, **summary([r for r in res if r.item.fresh == (kind == "fresh")])}
        for kind in ("kb", "fresh")
    ]
    return SuiteOutput([r.score for r in res], examples)
