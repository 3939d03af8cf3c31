"""On-policy cross-stage distillation: earlier checkpoints teach the student.

Each teacher is a checkpoint with the prompt sources it is the expert for and a ratio. One step:
    draw      prompts_per_step prompts, split across teachers by ratio (largest remainder),
              each teacher's prompts from its own seeded stream and cursor
    rollout   the student (through its engine) samples ONE response per prompt (no groups)
    score     the prompt's teacher runs a forward on prompt + response: log π_teacher(y_t)
    advantage A_t = sg[log π_teacher(y_t) − log π_student(y_t)] (`opd_advantages`), with the
              student's logprob taken from the rollout (the policy that actually sampled)
    loss      importance-sampled policy gradient against the rollout logprobs with token masking
              outside [1 − clip_low, 1 + clip_high] (`double_sided_is_loss`, A per token)
    step      AdamW, then weight sync to the engine (version + 1); log; resumable state with
              one prompt cursor per teacher
Maximizing Σ_t A_t is minimizing the reverse KL(π_student || π_teacher) on the student's own
samples, so the student is pulled back to the teacher exactly where it now goes wrong.

Deliberate simplifications: teachers share the student's tokenizer (same ids); all teachers stay
in memory; a response cut by max_new_tokens is kept (every token still has a teacher grade).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

import torch

from arcforge.config import OptimCfg
from arcforge.metrics import LoggingCfg
from arcforge.progress import progress
from arcforge.rl.losses import opd_advantages
from arcforge.rollout.engines.base import Engine, SamplingParams
from arcforge.rollout.prompts import RLPrompt
from arcforge.train.lora import policy_state_dict
from arcforge.train.on_policy import open_policy_run, optimizer_step
from arcforge.train.rl import PromptStream, policy_backward, sampling_seed
from arcforge.train.rollout_batch import (
    TokenBatch,
    pad_trajectories,
    sequence_logprobs,
    trajectory_from_completion,
)


class DistillSettings(Protocol):
    """What `train_distill` reads of its config (the distill stage's, arcforge.stages.distill),
    besides the `LossCfg` fields `policy_backward` reads (the stage config is a LossCfg)."""

    seed: int
    steps: int
    prompts_per_step: int
    temperature: float
    max_new_tokens: int
    micro_batch: int
    optim: OptimCfg
    checkpoint_every: int


@dataclass
class Teacher:
    """A loaded teacher: its frozen model, its prompts, its share of each step's prompts."""

    model: torch.nn.Module
    prompts: list[RLPrompt]
    ratio: float = 1.0
    name: str = ""


def split_by_ratio(ratios: list[float], n: int) -> list[int]:
    """n split by ratio with the largest-remainder rule (ties to the earlier teacher)."""
    exact = [n * r / sum(ratios) for r in ratios]
    counts = [int(x) for x in exact]
    order = sorted(range(len(ratios)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def teacher_logprobs(
    teachers: list[Teacher], owner: list[int], batch: TokenBatch, micro_batch: int
) -> torch.Tensor:
    """(B, T) log π_teacher of each target, each row scored by the teacher that owns it."""
    out = torch.zeros_like(batch.logp_infer)  # (B, T)
    rows = torch.tensor(owner)  # (B,) teacher index per row; rows are grouped by teacher
    with torch.no_grad():
        for i, t in enumerate(teachers):
            idx = (rows == i).nonzero().flatten()
            if len(idx):
                sl = slice(int(idx[0]), int(idx[-1]) + 1)
                out[sl] = sequence_logprobs(t.model, batch.rows(sl, trim=False), micro_batch)
    return out


def train_distill(
    student: torch.nn.Module,
    engine: Engine,
    teachers: list[Teacher],
    cfg: DistillSettings,
    out_dir: Path,
    *,
    pad_id: int,
    stop_ids: list[int],
    stop_after: int | None = None,
    desc: str = "distill",
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
) -> list[dict]:
    """Run `cfg.steps` on-policy distillation steps on `student`, syncing `engine` after each.

    Args:
        student: the trainer's policy (updated in place); engine starts with its weights.
        teachers: frozen teachers with their prompt pools and ratios.
        stop_after: stop after this many steps (state saved), to test resume.
        logging: where metrics go besides metrics.jsonl (None: metrics.jsonl only).
        run_name: the name W&B / trackio show for this run (default: out_dir's name).
    Returns:
        the metric rows logged by this call.
    """
    for t in teachers:
        t.model.eval().requires_grad_(False)
    streams = [PromptStream(t.prompts, cfg.seed + 7919 * i) for i, t in enumerate(teachers)]
    quotas = split_by_ratio([t.ratio for t in teachers], cfg.prompts_per_step)
    opt, state, sink = open_policy_run(student, engine, cfg.optim, out_dir, logging, run_name)
    start, cursors = state.step, state.info.get("cursors", [0] * len(teachers))
    rows: list[dict] = []
    student.train()
    with sink, progress(cfg.steps, desc, start=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.time()
            prompts, owner = [], []
            for i, (s, q) in enumerate(zip(streams, quotas)):
                prompts += s.take(cursors[i], q)
                owner += [i] * q
                cursors[i] += q
            params = SamplingParams(
                max_new_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature,
                stop_token_ids=tuple(stop_ids),
                seed=sampling_seed(cfg.seed, step, 0),
            )
            comps = engine.generate([p.ids for p in prompts], params)  # one response per prompt
            batch = pad_trajectories(
                [
                    trajectory_from_completion(p.ids, c, engine.version)
                    for p, c in zip(prompts, comps)
                ],
                pad_id,
            )
            batch.logp_ref = teacher_logprobs(teachers, owner, batch, cfg.micro_batch)  # (B, T)
            batch.advantages = opd_advantages(batch.logp_ref, batch.logp_infer) * batch.mask
            backward = partial(policy_backward, student, batch, cfg)
            stats = optimizer_step(student, opt, cfg, step, backward)
            engine.load_weights(policy_state_dict(student), engine.version + 1)
            # per-row reverse KL estimate Σ_t (log π_s − log π_t), averaged per teacher
            kl_row = (-batch.advantages).sum(1) / batch.mask.sum(1).clamp(min=1)  # (B,)
            own = torch.tensor(owner)
            done, gen = step + 1, sum(len(c.token_ids) for c in comps)
            row = {
                "step": done,
                "kl_to_teacher": kl_row.mean().item(),
                **{
                    f"kl_{teachers[i].name or i}": kl_row[own == i].mean().item()
                    for i in range(len(teachers))
                    if (own == i).any()
                },
                "overlong": sum(c.finish_reason == "length" for c in comps),
                "tokens_per_s": gen / max(1e-9, time.time() - t0),
                "lr": opt.param_groups[0]["lr"],
                "engine_version": engine.version,
                **stats,
            }
            rows.append(row)
            sink.log(done, row)
            stop = state.checkpoint_if_due(
                done,
                cfg.steps,
                cfg.checkpoint_every,
                stop_after,
                extra={"cursors": cursors, "engine_version": engine.version},
            )
            bar.update(done, kl=row["kl_to_teacher"])
            if stop:
                break
    student.eval()
    return rows
