"""Can a checkpoint copy a name from its context? The skill every agent suite needs.

Each item puts a two-word name into an instruction-like template and asks the model, teacher
forced and greedy, for the name's next mention. There are three templates: "Mention the word
'X'", a question that repeats X, and a tool call's "entity" argument. Names are either the
world's knowledge-base names (seen in pretraining) or fresh invented ones (never seen).
Prints the first-token and whole-name accuracy per checkpoint. Measured in session 5 on the
demo model (d 128 x 4 layers, 3M pretraining tokens): first token 4.7-8%, whole name 0. That
is why its agent suites stay at 0 (see the closing notes of issues 4, 6 and 7). A model that
copies scores near 1 on both. Session 6, with induction priming and copy rows (README, "Teaching
a tiny model to copy"): pretrain 17.3% / 20.7% first token, 1.3% / 2.7% whole name; SFT 40.7% /
35.3% and 7.3% / 4.0%.

Usage: python benchmarks/copy_probe.py CHECKPOINT [CHECKPOINT ...] --world RUN_DIR/world [--n 150]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch

from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer
from arcforge.world.names import NameBank
from arcforge.world.world import World

TEMPLATES = [
    "Write one sentence about {a}. Mention the word '{a}'. The word: '{b}",
    "{a} works for the guild. Where does {a} work? {b} works for the guild",
    'Look up {a}. <tool_call>{{"name": "lookup", "arguments": {{"entity": "{b}',
]


def probe(ckpt: Path, names: list[str], n: int, seed: int = 0) -> tuple[float, float]:
    """(first-token accuracy, whole-name accuracy) over `n` items."""
    tok, _ = load_tokenizer(ckpt)
    model = load_model(ckpt).eval()
    rng = random.Random(seed)
    first = whole = 0
    for _ in range(n):
        name, tmpl = rng.choice(names), rng.choice(TEMPLATES)
        pre = tok(tmpl.format(a=name, b=""), add_special_tokens=False)["input_ids"]
        ids = tok(tmpl.format(a=name, b=name), add_special_tokens=False)["input_ids"]
        if ids[: len(pre)] != pre:  # the name merged with the character before it
            pre = pre[:-1]
        with torch.inference_mode():
            pred = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1)
        ok = [int(pred[len(pre) - 1 + j] == ids[len(pre) + j]) for j in range(len(ids) - len(pre))]
        first += ok[0]
        whole += all(ok)
    return first / n, whole / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--world", type=Path, required=True, help="a run's world dir (RUN_DIR/world)")
    ap.add_argument("--n", type=int, default=150, help="items per checkpoint and name kind")
    args = ap.parse_args()
    world = World.load(args.world)
    kb = [e.name for e in world.kb.entities if len(e.name.split()) == 2]
    bank = NameBank(random.Random(1000))
    fresh = [bank.person() for _ in range(300)]
    for ck in args.checkpoints:
        kf, kw = probe(ck, kb, args.n)
        ff, fw = probe(ck, fresh, args.n)
        print(f"{ck}: KB names first {kf:.3f} whole {kw:.3f} | fresh names first {ff:.3f} "
              f"whole {fw:.3f}  (n={args.n} each)")  # fmt: skip


if __name__ == "__main__":
    main()
