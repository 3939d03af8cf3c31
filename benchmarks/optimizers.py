"""AdamW vs Muon vs Muon Split: held-out loss at equal tokens on the GLM-5 tiny model.

Each optimizer pretrains the same initial `glm5-tiny` weights (MLA + DSA + MoE) on the same
packed batches of the world corpus through `arcforge.train.lm.train_lm` (the loop every LM
stage runs), with the same learning rate, warmup and cosine schedule (Muon's Moonlight scaling
lets it share AdamW's learning rate). The held-out loss is measured on documents no batch
contains. Prints each optimizer's held-out loss and step time, then
`result: muon_vs_adamw=<AdamW held-out loss - Muon held-out loss>` (positive: Muon is ahead).
Then DSA's dense warm-up (arcforge.train.dsa) on the AdamW-trained model: only the lightning
indexers train, on the KL from the main attention (summed over heads) to the indexer's scores;
prints the per-step KL curve and the held-out KL before and after, and the result line adds
`dsa_kl_first=... dsa_kl_last=...` (mean KL of the first and last 5 warm-up steps).
torch runs one intra-op thread: the tiny model's ops are too small to gain from more, and on a
busy 2-core machine more threads contend.

Usage: python benchmarks/optimizers.py [--quick] [--steps N] [--lr LR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from arcforge.config import OptimCfg
from arcforge.data.packing import PackedDataset
from arcforge.model.checkpoint import count_params, init_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.train.dsa import DsaCfg, IndexerKL, dense_attention, run_dsa_phases
from arcforge.train.lm import heldout_loss, train_lm
from arcforge.train.loop import Phase
from arcforge.world import WorldConfig, build_world

OPTIMIZERS = ("adamw", "muon", "muon_split")


def run(
    name: str, conf, train: PackedDataset, held: torch.Tensor, steps: int, bs: int, lr: float
) -> tuple[float, float, torch.nn.Module]:
    """(held-out loss, seconds per step, model) after `steps` steps of optimizer `name`."""
    model = init_model(conf, seed=0)
    cfg = OptimCfg(name=name, lr=lr, warmup_steps=max(1, steps // 10))
    phase = Phase(steps, lambda s: train.batch(s, bs, seed=0), name="bench")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        train_lm(model, [phase], cfg, Path(d), log_every=10, checkpoint_every=10**9)
        dt = (time.perf_counter() - t0) / steps
    return heldout_loss(model, held), dt, model


def heldout_indexer_kl(model: torch.nn.Module, held: torch.Tensor) -> float:
    """Mean indexer KL (dense attention, over layers and queries) on held-out (N, T+1) blocks."""
    model.eval()
    with IndexerKL(model) as cap, dense_attention(model), torch.no_grad():
        model(input_ids=held[:, :-1], use_cache=False, logits_to_keep=1)
        kl = cap.pop()
    return float(sum(v.item() for v in kl) / len(kl))


def dsa_warmup(model, train: PackedDataset, held: torch.Tensor, steps: int, bs: int) -> list[float]:
    """DSA's dense warm-up on `model`; prints the KL curve; returns the per-step KLs."""
    before = heldout_indexer_kl(model, held)
    t0 = time.perf_counter()
    res = run_dsa_phases(
        model, lambda s: train.batch(s, bs, seed=1), DsaCfg(warmup_steps=steps, sparse_steps=0)
    )
    dt = (time.perf_counter() - t0) / steps
    after = heldout_indexer_kl(model, held)
    every = max(1, steps // 10)
    curve = " ".join(f"{v:.4f}" for v in res.warmup_kl[::every])
    print(f"dsa warm-up ({steps} steps, indexers only, s/step={dt:.3f}) indexer_kl: {curve}")
    print(f"dsa heldout indexer_kl: before={before:.4f} after={after:.4f}")
    return res.warmup_kl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="60 steps instead of 300")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=64)
    args = ap.parse_args()
    os.environ.setdefault("ARCFORGE_PROGRESS", "0")
    torch.set_num_threads(1)
    steps = args.steps or (60 if args.quick else 300)
    docs = [d.text for d in build_world(WorldConfig(seed=0, scale=0.1)).corpus()]
    tok = train_tokenizer(docs[:300], vocab_size=512)
    n_held = max(8, len(docs) // 10)
    train = PackedDataset.from_texts(docs[:-n_held], tok, args.seq_len, eos_id=tok.eos_token_id)
    held = PackedDataset.from_texts(docs[-n_held:], tok, args.seq_len, eos_id=tok.eos_token_id)
    conf = build_config(
        "glm5-tiny",
        vocab_size=len(tok),
        max_position_embeddings=args.seq_len,
        pad_token_id=tok.pad_token_id,
    )
    n = count_params(init_model(conf, seed=0))
    tokens = steps * args.batch * args.seq_len
    print(f"model=glm5-tiny params={n['total']:,} (non-embedding {n['non_embedding']:,})")
    print(
        f"steps={steps} batch={args.batch}x{args.seq_len} tokens={tokens:,} lr={args.lr} "
        f"train_rows={len(train)} heldout_rows={min(64, len(held))}"
    )
    losses, models = {}, {}
    for name in OPTIMIZERS:
        losses[name], dt, models[name] = run(
            name, conf, train, held.data[:64], steps, args.batch, args.lr
        )
        print(f"{name:<11} heldout_loss={losses[name]:.4f}  s/step={dt:.3f}")
    print(f"muon_split - muon heldout_loss: {losses['muon_split'] - losses['muon']:+.4f}")
    kl = dsa_warmup(models["adamw"], train, held.data[:16], 40 if args.quick else 150, args.batch)
    first, last = sum(kl[:5]) / len(kl[:5]), sum(kl[-5:]) / len(kl[-5:])
    print(
        f"result: muon_vs_adamw={losses['adamw'] - losses['muon']:+.4f} "
        f"dsa_kl_first={first:.4f} dsa_kl_last={last:.4f}"
    )


if __name__ == "__main__":
    main()
