"""vLLM (CPU build, in .venv-vllm) vs LocalEngine: rollout tokens per second, and weight-push ms.

Model: a ~3.7M-parameter Llama (d 256, 4 layers, 4 heads of 64, vocab 2048, MLP 512), random
init, fp32, built in-process; the same checkpoint in both engines. Batch of 64 prompts of 8-24
tokens, 48 new tokens each, T=1, no top-k/top-p, no stop tokens (vLLM's EOS is ignored, so
every completion has exactly 48 tokens on both sides). Both engines compute on one thread:
vLLM's server pins one engine-core thread to a core (it reduces torch to 1 thread on a 2-core
machine and leaves the other core to its API server) and is reached over HTTP with token ids
(arcforge.rollout.engines.vllm); LocalEngine runs in this process with `--threads` (default 1;
on a loaded 2-core machine 2 threads measured 4-10x slower than 1, from oversubscription). After one warm-up each, rounds run local then
vLLM back to back; the ratio is the median of the per-round ratios (paired, so that load from
other processes on a shared machine hits both sides alike). Weight push: `load_weights` of a
perturbed state dict (write the checkpoint, pause, reload_weights, reset the prefix cache,
resume), the median over pushes.

    .venv/bin/python benchmarks/engine_vllm.py [--quick] [--threads N]
Last line: `result: ratio=<vLLM tokens/s / LocalEngine tokens/s> push_ms=<median push>`.
Needs `make setup-vllm`; the server start (~2 min here) is not timed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from bench_llama import PAD, build_model

from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.vllm import VLLMEngine


def tokens_per_s(engine, prompts: list[list[int]], params: SamplingParams) -> float:
    t0 = time.perf_counter()
    comps = engine.generate(prompts, params)
    dt = time.perf_counter() - t0
    assert all(len(c.token_ids) == params.max_new_tokens for c in comps)
    return sum(len(c.token_ids) for c in comps) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer prompts, rounds and pushes")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the LocalEngine")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n_prompts, new, rounds, pushes = (16, 24, 2, 3) if args.quick else (64, 48, 5, 10)
    g = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(
            1, 2048, (int(torch.randint(8, 25, (1,), generator=g)),), generator=g
        ).tolist()
        for _ in range(n_prompts)
    ]
    params = SamplingParams(max_new_tokens=new, temperature=1.0, seed=0)
    model = build_model(tie_word_embeddings=True)
    local = LocalEngine(model, pad_token_id=PAD)
    with tempfile.TemporaryDirectory() as tmp, VLLMEngine(model, workdir=tmp) as vllm:
        tokens_per_s(local, prompts, params), tokens_per_s(vllm, prompts, params)  # warm-up
        ratios = []
        for r in range(rounds):
            lo, vl = tokens_per_s(local, prompts, params), tokens_per_s(vllm, prompts, params)
            ratios.append(vl / lo)
            print(f"round {r}: local {lo:.0f} tok/s, vLLM {vl:.0f} tok/s, ratio {vl / lo:.2f}")
        sd = model.state_dict()
        for v in range(1, pushes + 1):
            vllm.load_weights({k: t + 1e-3 * v for k, t in sd.items()}, version=v)
        push_ms = 1000 * statistics.median(vllm.push_seconds)
        print(
            f"LocalEngine threads: {torch.get_num_threads()}; {pushes} pushes, "
            f"median {push_ms:.0f} ms, max {1000 * max(vllm.push_seconds):.0f} ms"
        )
    print(f"result: ratio={statistics.median(ratios):.2f} push_ms={push_ms:.0f}")


if __name__ == "__main__":
    main()
