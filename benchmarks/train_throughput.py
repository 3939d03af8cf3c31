"""LM training loop throughput versus a bare PyTorch loop on the same model and batches.

Ours: `arcforge.train.lm.train_lm` (schedule, grad clipping, logging, resumable checkpoints,
progress bar) over a PackedDataset. Reference: the minimal loop (forward, cross-entropy,
backward, AdamW step) on the same batches. Both run the same number of steps from the same
initial weights; the first steps of each are warm-up and not timed.
Last line: `result: ratio=<ours tokens/s ÷ bare tokens/s>` (target >= 0.85).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from arcforge.config import OptimCfg
from arcforge.data.packing import PackedDataset
from arcforge.device import resolve_device
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.train.lm import train_lm
from arcforge.train.loop import Phase


def bare_loop(model, ds: PackedDataset, steps: int, bs: int, lr: float) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    dev = next(model.parameters()).device
    t0 = None
    for step in range(steps):
        if step == 3:
            t0 = time.perf_counter()
        b = ds.batch(step, bs, 0).to(dev)
        logits = model(input_ids=b[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), b[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    loss.item()  # wait for the device (the last step's work is queued on a GPU)
    return (steps - 3) * bs * (ds.seq_len) / (time.perf_counter() - t0)


def ours(model, ds: PackedDataset, steps: int, bs: int, lr: float) -> float:
    times: list[float] = []

    def batch(step: int):
        times.append(time.perf_counter())
        return ds.batch(step, bs, 0)

    with tempfile.TemporaryDirectory() as d:
        train_lm(
            model,
            [Phase(steps, batch)],
            OptimCfg(lr=lr, warmup_steps=0),
            Path(d),
            log_every=10,
            checkpoint_every=10_000,
        )
        end = time.perf_counter()
    return (steps - 3) * bs * ds.seq_len / (end - times[3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = ap.parse_args()
    dev = resolve_device(args.device)
    os.environ.setdefault("ARCFORGE_PROGRESS", "0")
    steps = 15 if args.quick else 60
    torch.manual_seed(0)
    data = torch.randint(0, 2048, (512, args.seq_len + 1))
    ds = PackedDataset(data)
    conf = build_config(args.preset, vocab_size=2048, max_position_embeddings=args.seq_len)
    rates = {"bare": [], "ours": []}
    for _ in range(2):  # alternate to spread machine noise over both
        rates["bare"].append(bare_loop(init_model(conf, 0).to(dev), ds, steps, args.batch, 1e-3))
        rates["ours"].append(ours(init_model(conf, 0).to(dev), ds, steps, args.batch, 1e-3))
    b, o = max(rates["bare"]), max(rates["ours"])
    print(f"model={args.preset} seq={args.seq_len} batch={args.batch} steps={steps} device={dev}")
    print(f"bare PyTorch loop: {b:,.0f} tokens/s")
    print(f"arcforge train_lm: {o:,.0f} tokens/s")
    print(f"result: ratio={o / b:.3f}")


if __name__ == "__main__":
    main()
