"""Plain vs MTP-speculative decoding in the LocalEngine: new tokens per second on one checkpoint.

Model: a GLM-5 preset (`glm5-tiny` by default; `--preset glm5-small`) over bytes (vocabulary
256, id 0 = padding), trained from scratch with its MTP head (`train_lm(mtp=...)`, loss
LM + 0.3 MTP, AdamW) on the world corpus as UTF-8 bytes (`world:corpus` of a 0.1-scale world;
`--corpus markov` swaps in a low-entropy synthetic chain). The checkpoint is written as a stock
`save_pretrained` directory plus `mtp.safetensors` and both engines load it from there.

Decoding: the first 48 bytes of held-out world documents as prompts, 96 new tokens each, fp32,
one row at a time for both engines (speculative decoding is a per-sequence latency option; the
plain engine gets `max_batch=1` so both decode the same sequences the same way), greedy and
T=1 (seeded). Both use the HF forward with a DynamicCache (GLM-5 has no lean decode path).
After a warm-up, each round decodes every prompt with plain then speculative back to back;
speeds are medians over rounds and the ratio is the median of per-round ratios (paired, so
load from other processes on a shared machine hits both sides alike).
Then the MTP head is self-distilled (`align_on_own_text`, `--align-steps`, 100 by default): KL to the
model's own next-token distribution on its greedy continuations of training prefixes, the main
model frozen; the greedy draft acceptance is printed before and after.
Mean acceptance length is the tokens emitted per target verify forward (k+1 at most).
One torch thread by default: at these sizes a second thread buys little, and on a shared,
oversubscribed 2-core machine two threads ran a training step 10x slower than one.

    .venv/bin/python benchmarks/spec_decode.py [--quick] [--preset glm5-small] [--steps N] [--align-steps N]
Last line: `result: ratio=<speculative / plain tokens/s, greedy> ratio_t1=<the same at T=1>`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model, load_model, save_checkpoint
from arcforge.model.mtp import MTPHead, load_mtp, mtp_loss, save_mtp
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.mtp_align import align_on_own_text
from arcforge.train.lm import heldout_loss, train_lm
from arcforge.train.loop import Phase
from arcforge.world import WorldConfig, build_world

PAD, VOCAB, SEQ = 0, 256, 128


def byte_ids(text: str) -> list[int]:
    return [b for b in text.encode("utf-8") if b != PAD]


def corpus(kind: str) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """Packed train rows (N, SEQ+1), held-out rows and prompts, as byte ids."""
    if kind == "world":
        world = build_world(WorldConfig(scale=0.1))
        train = [b for d in world.corpus() for b in byte_ids(d.text + "\n")]
        held_docs = [byte_ids(d.text + "\n") for d in world.heldout_corpus()]
    else:  # order-1 chain: each byte has one likely successor (p 0.8) and 3 rare ones
        g = torch.Generator().manual_seed(0)
        succ = torch.randint(1, VOCAB, (VOCAB, 4), generator=g)
        probs = torch.tensor([0.8, 0.1, 0.05, 0.05])
        seq, t = [], 1
        for _ in range(400_000):
            t = int(succ[t, torch.multinomial(probs, 1, generator=g)])
            seq.append(t)
        train, held_docs = seq[:360_000], [seq[i : i + 200] for i in range(360_000, 400_000, 200)]
    n = len(train) // (SEQ + 1)
    rows = torch.tensor(train[: n * (SEQ + 1)]).view(n, SEQ + 1)  # (N, SEQ+1)
    held = [d for d in held_docs if len(d) > SEQ + 1]
    held_rows = torch.tensor([d[: SEQ + 1] for d in held[:32]])  # (32, SEQ+1)
    prompts = [d[:48] for d in held[32:]]
    return rows, held_rows, prompts


def train(args, rows: torch.Tensor, held: torch.Tensor, out: Path) -> Path:
    cfg = build_config(args.preset, vocab_size=VOCAB, max_position_embeddings=512, pad_token_id=PAD)
    model, mtp = init_model(cfg, seed=0), MTPHead(cfg, draft_steps=args.draft_steps)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(rows), generator=g)

    def batch(step: int) -> torch.Tensor:
        idx = order[(step * args.batch + torch.arange(args.batch)) % len(rows)]
        return rows[idx]  # (B, SEQ+1)

    optim = OptimCfg(lr=3e-3, warmup_steps=10, weight_decay=0.0)
    t0 = time.perf_counter()
    train_lm(
        model,
        [Phase(args.steps, batch)],
        optim,
        out / "train",
        mtp=mtp,
        mtp_weight=0.3,
        log_every=10**9,
        checkpoint_every=10**9,
    )
    with torch.no_grad():
        lm, aux = heldout_loss(model, held), mtp_loss(model, mtp.eval(), held).item()
    print(
        f"trained {args.steps} steps x {args.batch} x {SEQ} bytes in "
        f"{time.perf_counter() - t0:.0f} s: held-out LM loss {lm:.3f}, MTP loss {aux:.3f} "
        f"(nats; chance {torch.log(torch.tensor(float(VOCAB))):.2f})"
    )
    ckpt = save_checkpoint(model, None, out / "checkpoint")
    save_mtp(mtp, ckpt)
    return ckpt


def greedy_acceptance(model, mtp, prompts, draft_steps: int) -> float:
    """Draft acceptance of greedy speculative decoding on the prompts (untimed)."""
    engine = LocalEngine(model, pad_token_id=PAD, mtp=mtp, draft_steps=draft_steps)
    engine.generate(prompts, SamplingParams(96, temperature=0.0))
    return engine.spec_stats.accepted / max(1, engine.spec_stats.drafted)


def align(args, model, mtp, rows: torch.Tensor) -> None:
    """Self-distil the MTP head (`align_on_own_text`) on the model's greedy continuations of
    16-byte prefixes of training rows (never the held-out prompts)."""
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(1)
    starts = [r[:16].tolist() for r in rows[torch.randperm(len(rows), generator=g)[:64]]]
    losses = align_on_own_text(model, mtp, starts, SEQ, PAD, args.align_steps, lr=1e-3)
    print(
        f"aligned the MTP head: {args.align_steps} steps on {len(starts)} greedy continuations "
        f"of training prefixes in {time.perf_counter() - t0:.0f} s, KL {losses[0]:.3f} -> "
        f"{statistics.mean(losses[-10:]):.3f}"
    )


def compare(plain, spec, prompts, params: SamplingParams, rounds: int, label: str) -> float:
    """Per round, each prompt decodes with plain then speculative back to back (a load burst
    from other processes lands on both); the round's ratio is of the two summed speeds."""
    plain.generate(prompts[:1], params)  # warm-up
    spec.generate(prompts[:1], params)
    s0 = spec.spec_stats
    rounds0, emitted0, acc0, drafted0 = s0.rounds, s0.emitted, s0.accepted, s0.drafted
    speeds_p, speeds_s, ratios, same = [], [], [], True
    for _ in range(rounds):
        secs, toks = [0.0, 0.0], [0, 0]
        for prompt in prompts:
            outs = []
            for i, engine in enumerate((plain, spec)):
                t0 = time.perf_counter()
                out = engine.generate([prompt], params)[0]
                secs[i] += time.perf_counter() - t0
                toks[i] += len(out.token_ids)
                outs.append(out.token_ids)
            same &= outs[0] == outs[1]
        speeds_p.append(toks[0] / secs[0])
        speeds_s.append(toks[1] / secs[1])
        ratios.append(speeds_s[-1] / speeds_p[-1])
    s = spec.spec_stats
    tau = (s.emitted - emitted0) / max(1, s.rounds - rounds0)
    acc = (s.accepted - acc0) / max(1, s.drafted - drafted0)
    extra = f"  tokens identical to plain: {same}" if params.temperature == 0 else ""
    print(
        f"{label}: plain {statistics.median(speeds_p):6.1f} tok/s  speculative "
        f"{statistics.median(speeds_s):6.1f} tok/s  ratio {statistics.median(ratios):.2f}  "
        f"mean acceptance length {tau:.2f}  draft acceptance {acc:.2f}{extra}"
    )
    return statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps, prompts and rounds")
    ap.add_argument("--preset", default="glm5-tiny", choices=["glm5-tiny", "glm5-small"])
    ap.add_argument("--corpus", default="world", choices=["world", "markov"])
    ap.add_argument("--steps", type=int, default=0, help="training steps (0: 300 quick, 600)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--draft-steps", type=int, default=2)
    ap.add_argument(
        "--align-steps", type=int, default=100, help="MTP self-distillation steps (0: none)"
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.steps = args.steps or (300 if args.quick else 600)
    n_prompts, rounds, new = (6, 3, 96) if args.quick else (8, 5, 96)

    rows, held, prompts = corpus(args.corpus)
    prompts = prompts[:n_prompts]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = train(args, rows, held, Path(tmp))
        model = load_model(ckpt, device=torch.device("cpu")).eval()
        mtp = load_mtp(ckpt)
    n = sum(p.numel() for p in model.parameters())
    print(
        f"model: {args.preset} ({n / 1e6:.2f}M params) + MTP head "
        f"({sum(p.numel() for p in mtp.parameters()) / 1e6:.2f}M), {args.draft_steps} drafts "
        f"per round; corpus {args.corpus}; {len(prompts)} prompts x {new} new bytes, "
        f"threads={torch.get_num_threads()}"
    )
    if args.align_steps:
        before = greedy_acceptance(model, mtp, prompts, args.draft_steps)
        align(args, model, mtp, rows)
        after = greedy_acceptance(model, mtp, prompts, args.draft_steps)
        print(f"greedy draft acceptance: {before:.2f} before alignment, {after:.2f} after")
    plain = LocalEngine(model, pad_token_id=PAD, max_batch=1)
    spec = LocalEngine(model, pad_token_id=PAD, mtp=mtp, draft_steps=args.draft_steps)
    greedy = compare(plain, spec, prompts, SamplingParams(new, temperature=0.0), rounds, "greedy")
    t1 = compare(plain, spec, prompts, SamplingParams(new, temperature=1.0, seed=0), rounds, "T=1")
    print(f"result: ratio={greedy:.2f} ratio_t1={t1:.2f}")


if __name__ == "__main__":
    main()
