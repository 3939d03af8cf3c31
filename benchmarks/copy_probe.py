"""Can a checkpoint copy a name from its context? The skill every agent suite needs.

The probe of the `copy` eval suite (arcforge/eval/copying.py), per name kind: the world's
knowledge-base names (seen in pretraining) and fresh invented ones (never seen). Prints the
first-token and whole-name accuracy per checkpoint. Measured in session 5 on the demo model (d 128 x 4 layers, 3M pretraining tokens): first token 4.7-8%, whole name 0. That
is why its agent suites stay at 0 (see the closing notes of issues 4, 6 and 7). A model that
copies scores near 1 on both. Session 6, with induction priming and copy rows (README, "Teaching
a tiny model to copy"): pretrain 17.3% / 20.7% first token, 1.3% / 2.7% whole name; SFT 40.7% /
35.3% and 7.3% / 4.0%.

Usage: python benchmarks/copy_probe.py CHECKPOINT [CHECKPOINT ...] --world RUN_DIR/world [--n 150]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from arcforge.eval.copying import copy_items, probe_names, score_copy, summary
from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer
from arcforge.world.world import World


def probe(model, tok, names: list[str], n: int, fresh: bool) -> tuple[float, float]:
    """(first-token accuracy, whole-name accuracy) over `n` items."""
    res = summary(score_copy(model, tok, copy_items(names, n, fresh, seed=0)))
    return res["first"], res["whole"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path)
    ap.add_argument("--world", type=Path, required=True, help="a run's world dir (RUN_DIR/world)")
    ap.add_argument("--n", type=int, default=150, help="items per checkpoint and name kind")
    args = ap.parse_args()
    world = World.load(args.world)
    kb, fresh = probe_names(world)
    for ck in args.checkpoints:
        tok, _ = load_tokenizer(ck)
        model = load_model(ck).eval()  # once per checkpoint, for both name kinds
        kf, kw = probe(model, tok, kb, args.n, False)
        ff, fw = probe(model, tok, fresh, args.n, True)
        print(
            f"{ck}: KB names first {kf:.3f} whole {kw:.3f} | fresh names first {ff:.3f} "
            f"whole {fw:.3f}  (n={args.n} each)"
        )


if __name__ == "__main__":
    main()
