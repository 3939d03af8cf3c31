"""The measurements of benchmarks/gpu_check.sh: rollout tokens/s, the train/inference mismatch
(IcePop's ρ), an RL step and an FSDP2 step, each printed as a `result:` line.

Subcommands (all take --device; the shell script runs them on one GPU):
    build DIR      a random-init Llama checkpoint built with arcforge's presets (overrides give
                   its size; head size 64, which vLLM's GPU attention kernels support), saved
                   with `save_pretrained`
    rollout DIR    loads DIR as the trainer's fp32 model, samples --prompts random prompts of
                   16-48 tokens x --new tokens on the engine (vllm: arcforge.rollout.engines.vllm
                   serving --vllm-dtype; local: the LocalEngine at --local-precision), then
                     result: rollout tokens_per_s=...      (the median of --rounds timed calls)
                     result: rho p001=... p01=... p50=... p99=... p999=... popped_beta2=...
                       ρ = exp(logp_trainer − logp_engine) per sampled token, the trainer's
                       logprobs recomputed teacher-forced in fp32 (arcforge's sequence_logprobs)
                     result: rl_step seconds=...           a GRPO+IcePop step (policy_backward
                       and AdamW) on those rollouts with random rewards, median of 3 after 1
                     result: push ms=...                   one weight push into the engine
    fsdp2 DIR      under torchrun: arcforge's train loop with trainer backend fsdp2 on SFT-shaped
                   random batches; result: fsdp2_step seconds=... (median step, first excluded)

Usage: python benchmarks/gpu_check.py build DIR [--hidden 1024 --layers 12 --heads 16]
       python benchmarks/gpu_check.py rollout DIR --engine vllm --device cuda
       torchrun --standalone --nproc-per-node N benchmarks/gpu_check.py fsdp2 DIR
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(args) -> None:
    from arcforge.model.checkpoint import init_model
    from arcforge.model.presets import build_config

    over = {
        "hidden_size": args.hidden,
        "num_hidden_layers": args.layers,
        "num_attention_heads": args.heads,
        "num_key_value_heads": args.heads,
        "intermediate_size": args.hidden * 11 // 4,
    }
    model = init_model(build_config("small", args.vocab, args.max_len, **over), seed=0)
    model.config.architectures = [type(model).__name__]
    model.save_pretrained(args.dir)
    n = sum(p.numel() for p in model.parameters())
    print(f"result: checkpoint dir={args.dir} params_m={n / 1e6:.1f} head_dim=", end="")
    print(args.hidden // args.heads)


def _load(path: str, device: torch.device):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model.to(device).eval()


def _engine(args, model):
    if args.engine == "vllm":
        from arcforge.rollout.engines.vllm import VLLMEngine

        extra = ["--dtype", args.vllm_dtype, "--gpu-memory-utilization", str(args.vllm_mem)]
        return VLLMEngine(model, extra_args=extra, startup_timeout=args.startup_timeout)
    from arcforge.rollout.engines.local import LocalEngine

    return LocalEngine(model, pad_token_id=0, precision=args.local_precision, max_batch=512)


def rollout(args) -> None:
    from arcforge.config import LossCfg
    from arcforge.rl.advantages import group_advantages
    from arcforge.rollout.engines.base import SamplingParams
    from arcforge.train.rl import policy_backward
    from arcforge.train.rollout_batch import (
        pad_trajectories,
        sequence_logprobs,
        trajectory_from_completion,
    )

    device = torch.device(args.device)
    model = _load(args.dir, device)
    V = model.config.vocab_size
    rng = random.Random(0)
    prompts = [
        [rng.randrange(1, V) for _ in range(rng.randint(16, 48))] for _ in range(args.prompts)
    ]
    params = SamplingParams(max_new_tokens=args.new, temperature=1.0, n=1)
    engine = _engine(args, model)
    try:
        engine.generate(prompts[:8], params)  # warm-up
        rates, comps = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            comps = engine.generate(prompts, params)
            rates.append(sum(len(c.token_ids) for c in comps) / (time.perf_counter() - t0))
        print(f"result: rollout engine={args.engine} tokens_per_s={statistics.median(rates):.0f}")

        trajs = [trajectory_from_completion(p, c, 0) for p, c in zip(prompts, comps)]
        batch = pad_trajectories(trajs, pad_id=0)
        with torch.no_grad():
            lp_train = sequence_logprobs(model, batch, 32)  # (B, T), on the batch's CPU
        m = batch.mask > 0  # (B, T) sampled tokens
        diff = (lp_train.cpu() - batch.logp_infer)[m].double()  # (N,) log ρ
        rho = diff.exp()
        q = torch.quantile(rho, torch.tensor([0.001, 0.01, 0.5, 0.99, 0.999], dtype=rho.dtype))
        popped = ((rho < 0.5) | (rho > 2.0)).double().mean().item()
        print(
            f"result: rho p001={q[0]:.4f} p01={q[1]:.4f} p50={q[2]:.4f} p99={q[3]:.4f} "
            f"p999={q[4]:.4f} popped_beta2={popped:.5f} max_abs_dlogp={diff.abs().max():.4f} "
            f"tokens={int(m.sum())}"
        )

        rewards = torch.tensor([float(rng.random() < 0.5) for _ in trajs])  # (B,)
        batch.advantages = group_advantages(rewards, 8, "mean", False)
        cfg = LossCfg(micro_batch=args.micro_batch)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
        model.train()
        times = []
        for _ in range(4):
            _sync(device)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            policy_backward(model, batch, cfg)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            _sync(device)
            times.append(time.perf_counter() - t0)
        print(
            f"result: rl_step seconds={statistics.median(times[1:]):.3f} rows={len(trajs)} "
            f"tokens={int(batch.mask.sum())}"
        )

        t0 = time.perf_counter()
        engine.load_weights({k: v.detach() for k, v in model.state_dict().items()}, 1)
        print(f"result: push ms={(time.perf_counter() - t0) * 1e3:.0f}")
    finally:
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def fsdp2(args) -> None:
    from transformers import AutoModelForCausalLM

    from arcforge.config import OptimCfg
    from arcforge.train.fsdp import TrainerCfg
    from arcforge.train.loop import Phase, train_loop
    from arcforge.train.sft import sft_loss

    model = AutoModelForCausalLM.from_pretrained(args.dir, dtype=torch.float32)
    V, stamps = model.config.vocab_size, []

    def batch(step: int):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())  # the start of step `step`: the last one ended
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, V, (args.rows, args.seq), generator=g)  # (B, T)
        return x, torch.roll(x, -1, dims=1)

    with tempfile.TemporaryDirectory(prefix="arcforge-fsdp2-") as out:
        train_loop(
            model,
            [Phase(args.steps, batch, name="sft")],
            sft_loss,
            OptimCfg(lr=1e-5, warmup_steps=0),
            Path(out),
            log_every=10**6,
            checkpoint_every=10**6,  # no state saved: only the last step ends the loop
            trainer=TrainerCfg(backend="fsdp2"),
        )
    import torch.distributed as dist

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    stamps.append(time.perf_counter())  # the end of the last step
    steps = [b - a for a, b in zip(stamps, stamps[1:])][1:]  # the first step compiles/warms
    if dist.get_rank() == 0:
        world = dist.get_world_size()
        print(
            f"result: fsdp2_step seconds={statistics.median(steps):.3f} ranks={world} "
            f"rows={args.rows} seq={args.seq}"
        )
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--hidden", type=int, default=1024)
    b.add_argument("--layers", type=int, default=12)
    b.add_argument("--heads", type=int, default=16)
    b.add_argument("--vocab", type=int, default=32000)
    b.add_argument("--max-len", type=int, default=2048)
    r = sub.add_parser("rollout")
    r.add_argument("dir")
    r.add_argument("--device", default="cuda")
    r.add_argument("--engine", choices=["vllm", "local"], default="vllm")
    r.add_argument("--prompts", type=int, default=256)
    r.add_argument("--new", type=int, default=128)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--micro-batch", type=int, default=32)
    r.add_argument("--vllm-dtype", default="bfloat16")
    r.add_argument("--vllm-mem", type=float, default=0.4)
    r.add_argument("--startup-timeout", type=float, default=420)
    r.add_argument("--local-precision", default="bf16")
    f = sub.add_parser("fsdp2")
    f.add_argument("dir")
    f.add_argument("--steps", type=int, default=6)
    f.add_argument("--rows", type=int, default=16)
    f.add_argument("--seq", type=int, default=512)
    args = ap.parse_args()
    {"build": build, "rollout": rollout, "fsdp2": fsdp2}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
