"""IcePop under a real train/inference mismatch: int8 (or bf16) rollouts, fp32 training.

The RL task is the toy of tests/train/test_rl.py made a little wider: prompt [BOS, a, SEP] for 20
symbols a, reply [table[a], END], reward 1 when right. A nano model is SFT'd on data that is
right 40% of the time, then trained with GRPO twice from the same weights with the same seeds
and steps: once with IcePop (tokens with ρ = π_train_old / π_infer outside [1/β, β] dropped,
the rest weighted by ρ) and once without (ρ treated as 1). Rollouts come from a LocalEngine in
the lower precision; the trainer recomputes logprobs in fp32.

Prints the measured ρ distribution on the first rollout batch (quantiles, the share outside
[1/β, β]), the reward curves of both runs, and ends with
`result: popped_frac=... reward_icepop=... reward_no_icepop=...` (final 5-step means).

Usage: python benchmarks/icepop_mismatch.py [--quick] [--precision int8|bf16] [--beta B]
"""

from __future__ import annotations

import argparse
import copy
import random
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.prompts import RLPrompt
from arcforge.stages.rl import RLStageCfg
from arcforge.train.rl import PromptStream, collect_rollouts, train_rl
from arcforge.train.rollout_batch import sequence_logprobs
from arcforge.types import Reward, Task, Validation

PAD, BOS, END, SEP, S0, D0, N = 0, 1, 2, 3, 4, 24, 20
TABLE = [random.Random(0).randrange(10) for _ in range(N)]


def prompts() -> list[RLPrompt]:
    return [
        RLPrompt(
            [BOS, S0 + a, SEP],
            Task(f"a{a}", "math", str(a), validation=Validation(answer=str(D0 + TABLE[a]))),
        )
        for a in range(N)
    ]


def scorer(ps, comps):
    return [
        Reward(float(c.token_ids == [int(p.task.validation.answer), END]))
        for p, c in zip(ps, comps)
    ]


def partly_trained(steps: int = 80) -> torch.nn.Module:
    torch.manual_seed(0)
    conf = build_config(
        "nano",
        vocab_size=D0 + 10,
        max_position_embeddings=16,
        pad_token_id=PAD,
        bos_token_id=BOS,
        eos_token_id=END,
    )
    model = init_model(conf, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        a, d = torch.randint(N, (64,)), torch.randint(10, (64,))
        d = torch.where(torch.rand(64) < 0.4, torch.tensor(TABLE)[a], d)
        ones = torch.ones_like(a)
        x = torch.stack([ones * (BOS), S0 + a, ones * (SEP), D0 + d], 1)
        y = torch.stack([ones * (-100), ones * (-100), D0 + d, ones * (END)], 1)
        loss = F.cross_entropy(model(input_ids=x).logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def rho_report(model, cfg: RLStageCfg) -> float:
    """Print the ρ distribution of one rollout batch; return the popped share at cfg's β."""
    eng = LocalEngine(model, pad_token_id=PAD, precision=cfg.engine_precision)
    ro = collect_rollouts(eng, PromptStream(prompts(), cfg.seed), 0, scorer, cfg, 0, [END], PAD)
    with torch.no_grad():
        lp = sequence_logprobs(model, ro.batch)  # (B, T) fp32 trainer
    m = ro.batch.mask.bool()
    rho = torch.exp(lp - ro.batch.logp_infer)[m]  # (n_tokens,)
    qs = torch.tensor([0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0])
    print(f"rho over {m.sum().item()} sampled tokens ({cfg.engine_precision} engine vs fp32):")
    print("  quantiles " + "  ".join(f"q{q:.2f}={v:.4f}" for q, v in zip(qs, rho.quantile(qs))))
    print(f"  |log rho| mean {rho.log().abs().mean():.4f}, max {rho.log().abs().max():.4f}")
    for beta in (1.02, 1.05, 1.1, 1.5, cfg.icepop_beta):
        out = ((rho < 1 / beta) | (rho > beta)).float().mean().item()
        print(f"  outside [1/{beta:g}, {beta:g}]: {out:.4f}")
    return ((rho < 1 / cfg.icepop_beta) | (rho > cfg.icepop_beta)).float().mean().item()


def run(model, cfg: RLStageCfg) -> list[dict]:
    m = copy.deepcopy(model)
    eng = LocalEngine(m, pad_token_id=PAD, precision=cfg.engine_precision)
    with tempfile.TemporaryDirectory() as d:
        return train_rl(
            m,
            eng,
            prompts(),
            scorer,
            cfg,
            Path(d),
            pad_id=PAD,
            stop_ids=[END],
            desc=f"icepop={'on' if cfg.icepop_beta else 'off'}",
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="15 steps instead of 60")
    ap.add_argument("--precision", default="int8", choices=["int8", "bf16"])
    ap.add_argument("--beta", type=float, default=1.5)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    steps = 15 if args.quick else 60
    base = dict(
        name="rl",
        kind="rl",
        sources=[{"source": "toy"}],
        steps=steps,
        prompts_per_step=16,
        group_size=8,
        temperature=1.0,
        max_new_tokens=3,
        engine_precision=args.precision,
        icepop_beta=args.beta,
        optim={"lr": args.lr, "warmup_steps": 0, "min_lr_ratio": 1.0, "weight_decay": 0.0},
    )
    on = RLStageCfg.model_validate(base)
    off = RLStageCfg.model_validate({**base, "icepop_beta": None})
    model = partly_trained()
    popped = rho_report(model, on)
    curves = {"icepop": run(model, on), "no_icepop": run(model, off)}
    print("step  " + "  ".join(f"{k:>10}" for k in curves) + "  popped_frac(icepop)")
    for i in range(steps):
        r = [curves[k][i]["reward_mean"] for k in curves]
        print(
            f"{i + 1:4d}  "
            + "  ".join(f"{x:10.3f}" for x in r)
            + f"  {curves['icepop'][i].get('popped_frac', float('nan')):.4f}"
        )
    final = {k: sum(r["reward_mean"] for r in v[-5:]) / 5 for k, v in curves.items()}
    print(
        f"result: popped_frac={popped:.4f} reward_icepop={final['icepop']:.3f} "
        f"reward_no_icepop={final['no_icepop']:.3f}"
    )


if __name__ == "__main__":
    main()
