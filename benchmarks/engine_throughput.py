"""LocalEngine vs HF `generate`: new tokens per second, same model, prompts and sampling.

Model: a ~3.7M-parameter Llama (d 256, 4 layers, 4 heads, vocab 2048, MLP 512), random init,
fp32, built in-process. Batch 64 prompts of 8-24 tokens (left-padded), 48 new tokens, T=1,
no top-k/top-p (HF gets `top_k=0`, since transformers 5.24 applies top_k=50 by default), no
stop tokens, both with a KV cache. HF generate is forced to emit exactly 48 tokens
(`min_new_tokens`). After one warm-up each, rounds run ours then HF back to back; the result
is the median of the per-round ratios (paired, so that load from other processes on a shared
machine hits both sides of a ratio alike). `--threads N` pins torch's thread count.

    .venv/bin/python benchmarks/engine_throughput.py [--quick] [--device cuda]
Last line: `result: ratio=<ours / HF>`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from bench_llama import PAD, build_model

from arcforge.device import resolve_device
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine


def make_prompts(batch: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(8, 25, (batch,), generator=g).tolist()
    return [torch.randint(1, 2048, (n,), generator=g).tolist() for n in lengths]


def run_ours(engine: LocalEngine, prompts, new_tokens: int) -> int:
    out = engine.generate(prompts, SamplingParams(max_new_tokens=new_tokens, temperature=1.0))
    return sum(len(c.token_ids) for c in out)


def run_hf(model, prompts, new_tokens: int) -> int:
    P = max(map(len, prompts))
    ids = torch.full((len(prompts), P), PAD, dtype=torch.long)  # (B, P) left-padded
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, P - len(p) :], mask[b, P - len(p) :] = torch.tensor(p), 1
    dev = next(model.parameters()).device
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids.to(dev),
            attention_mask=mask.to(dev),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=PAD,
            use_cache=True,
        )
    return (out.shape[1] - P) * len(prompts)


def timed(fn) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 timed rounds instead of 5")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = 2 if args.quick else 5

    model = build_model().to(resolve_device(args.device))
    n_params = sum(p.numel() for p in model.parameters())
    engine = LocalEngine(model, pad_token_id=PAD, precision="fp32", max_batch=args.batch)
    prompts = make_prompts(args.batch)
    print(
        f"model: {n_params / 1e6:.2f}M params; batch {args.batch}, "
        f"{args.new_tokens} new tokens, T=1, threads={torch.get_num_threads()}, "
        f"device={next(model.parameters()).device}"
    )

    ours, hf, ratios = [], [], []
    run_ours(engine, prompts, 4)  # warm-up
    run_hf(model, prompts, 4)
    for i in range(rounds):
        dt, n = timed(lambda: run_ours(engine, prompts, args.new_tokens))
        ours.append(n / dt)
        dt_hf, n_hf = timed(lambda: run_hf(model, prompts, args.new_tokens))
        hf.append(n_hf / dt_hf)
        ratios.append(ours[-1] / hf[-1])
        print(
            f"round {i}: LocalEngine {ours[-1]:6.0f} tok/s   HF generate {hf[-1]:6.0f} tok/s"
            f"   ratio {ratios[-1]:.2f}"
        )
    print(f"LocalEngine (median): {statistics.median(ours):.0f} new tokens/s")
    print(f"HF generate (median): {statistics.median(hf):.0f} new tokens/s")
    print(f"result: ratio={statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
