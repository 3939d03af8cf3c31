"""Agentic RL with asynchronous, decoupled rollout and training (GLM-5 §4).

Rollout workers (threads, or Ray actors) generate continuously through the orchestrator; the
trainer below takes a batch whenever one is ready:

    batch     orch.next_batch(): quota per pool (task kind), over-stale groups (version - w0 > tau)
              already dropped and counted; the trainer is idle only while it waits here
    tensors   TITO trajectories -> one padded TokenBatch; observation/template tokens have
              loss 0 from the agent loop; overlong trajectories (a reply cut by
              max_new_tokens, or the context budget hit) are dropped whole (mask 0, they still
              count in their group's baseline); GRPO advantages per group
    loss      double_sided_is_loss against the rollout logprobs, token by token, whatever
              version produced each token (no old-policy recompute): policy_backward of the
              synchronous trainer, with loss "double_sided_is"
    step      AdamW; every `sync_every` steps the weights are pushed to the engines as version
              + 1 (timeout -> WeightSyncTimeout) and, with reset_optimizer, Adam's moments are
              cleared; episodes in flight continue on the new weights (partial rollouts keep
              per-segment versions)
    log/save  metrics.jsonl and the run's other metric sinks (idle fraction, staleness, drops,
              mixture); the resumable state (arcforge.train.resume) holds weights, optimizer,
              RNG, step, version and the orchestrator's state
    average   optional (`weight_ema: d`): a Polyak average of the weights (WeightEMA)
    probe     optional (`probe:`): greedy episodes on dev tasks at step 0, every `probe.every`
              steps and at the end (StepProbe); `probe.keep` picks the weights the stage ends
              on (kept_probe); both in arcforge.train.step_select

Synchronous RL is the same code with tau = 0 and sync_every = 1: the orchestrator then admits
exactly one batch of jobs per version. Deliberate simplification: with sync_every > 1 a state
saved between pushes restores the trainer's newer weights into the engines under the saved
version number.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import torch

from arcforge.config import OptimCfg
from arcforge.metrics import LoggingCfg, MetricSink
from arcforge.progress import progress
from arcforge.rewards.swarm import swarm_stats
from arcforge.rl.advantages import dynamic_sampling_mask, group_advantages
from arcforge.rollout.orchestrator import GroupBatch, Orchestrator
from arcforge.train.lora import policy_state_dict
from arcforge.train.on_policy import optimizer_step
from arcforge.train.optim import Optimizer, build_optimizer, lr_at
from arcforge.train.resume import TrainerState
from arcforge.train.rl import policy_backward
from arcforge.train.rollout_batch import TokenBatch, pad_trajectories
from arcforge.train.step_select import (
    Probe,
    ProbeSettings,
    StepProbe,
    WeightEMA,
)
from arcforge.train.step_select import kept_probe as kept_probe  # the stage's import

OVERLONG = ("length", "context")


class AsyncRLSettings(Protocol):
    """What `train_async_rl` reads of its config (the agentic RL stage's,
    arcforge.stages.agentic_rl), besides the `LossCfg` fields `policy_backward` reads (the
    stage config is a LossCfg)."""

    steps: int
    sync_every: int
    reset_optimizer: bool
    weight_sync_timeout: float
    batch_timeout: float
    temperature: float
    tempered_logprobs: bool
    weight_ema: float
    probe: ProbeSettings | None
    optim: OptimCfg
    checkpoint_every: int


def batch_tensors(
    batch: GroupBatch, pad_id: int, temperatures: dict[str, float] | None = None
) -> tuple[TokenBatch, dict]:
    """The batch as padded tensors with GRPO advantages (over groups of `batch.group_size`)
    and overlong rows masked, plus counts. With `temperatures` (pool -> the temperature its episodes were sampled at; tempered
    logprobs), each row's temperature is set so the trainer scores it as it was sampled.

    Returns:
        (TokenBatch, stats: trajectories, overlong, partial (several versions in one
        trajectory), staleness_max/mean, reward_mean, signal_frac (the share of groups with
        unequal rewards), and per pool its group count
        (groups_<pool>), mean reward (reward_<pool>), share of episodes that scored 1
        (solved_<pool>; below reward_ only with partial credit, e.g. call_credit), share of
        groups with unequal rewards (signal_<pool>) and trained tokens (tokens_<pool>)).
    """
    trajs, group_size = batch.trajectories, batch.group_size
    tb = pad_trajectories(trajs, pad_id)
    rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float)  # (B*G,)
    tb.advantages = group_advantages(rewards, group_size)  # (B*G,)
    if temperatures is not None:
        missing = sorted({g.pool for g in batch.groups} - set(temperatures))
        if missing:
            raise ValueError(f"no sampling temperature for pool(s) {missing}")
        tb.temperature = torch.tensor(
            [temperatures[g.pool] for g in batch.groups for _ in range(group_size)]
        )  # (B*G,)
    overlong = torch.tensor([t.finish_reason in OVERLONG for t in trajs])  # (B*G,)
    tb.mask[overlong] = 0.0  # dropped whole: no token of it is trained
    stale = [batch.version - g.start_version for g in batch.groups]
    varied = dynamic_sampling_mask(rewards, group_size)  # (B*G,) rows of groups with a gradient
    model_versions = [{s.policy_version for s in t.segments if s.source == "model"} for t in trajs]
    stats = {
        "trajectories": len(trajs),
        "overlong": int(overlong.sum()),
        "partial": sum(len(v) > 1 for v in model_versions),
        "staleness_max": max(stale),
        "staleness_mean": sum(stale) / len(stale),
        "reward_mean": rewards.mean().item(),
        # groups with unequal rewards, the only ones with a GRPO gradient: read the per-pool
        # rewards against it (the seeded task stream, more than learning, sets their level)
        "signal_frac": varied.float().mean().item(),
    }
    signal = varied[::group_size].float()  # (B,) per group
    trained = (tb.mask > 0).sum(dim=1).view(-1, group_size).sum(dim=1)  # (B,) tokens per group
    for k in sorted({g.pool for g in batch.groups}):
        mine = [i for i, g in enumerate(batch.groups) if g.pool == k]
        stats[f"groups_{k}"] = len(mine)
        # which task kind is (not) learning
        pool_rewards = rewards.view(-1, group_size)[mine]  # (groups of the pool, G)
        stats[f"reward_{k}"] = pool_rewards.mean().item()
        # episodes that scored 1, the pool's success rate (reward_ also counts partial credit)
        stats[f"solved_{k}"] = (pool_rewards >= 1.0).float().mean().item()
        stats[f"signal_{k}"] = signal[mine].mean().item()  # its groups with a gradient
        # its share of the trained tokens: with token_mean, the share of the loss it weighs
        stats[f"tokens_{k}"] = int(trained[mine].sum())
    stats.update(swarm_stats([t.reward_details for t in trajs]))  # PARL terms, critical steps
    return tb, stats


def has_signal(tb: TokenBatch) -> bool:
    """Whether any trained trajectory has a nonzero advantage. A batch whose every group got
    one reward has a zero policy gradient, yet AdamW would still move the weights along its
    momentum; such a step is skipped (the version still advances, so admission keeps pace)."""
    return len(tb.signal_rows()) > 0


def train_step(
    model: torch.nn.Module, opt: Optimizer, tb: TokenBatch, cfg: AsyncRLSettings, step: int
) -> dict[str, float]:
    """One optimizer step on `tb` at step `step`'s learning rate: backward, clip, AdamW; a
    batch without signal (`has_signal`) leaves the weights as they are.

    Returns:
        updated (1.0 when the weights moved), loss, grad_norm and the loss's stats.
    """
    stats: dict[str, float] = {"updated": float(has_signal(tb)), "loss": 0.0, "grad_norm": 0.0}
    if stats["updated"]:
        temperature = cfg.temperature if cfg.tempered_logprobs else 1.0
        backward = partial(policy_backward, model, tb, cfg, temperature=temperature)
        stats.update(optimizer_step(model, opt, cfg, step, backward))
    return stats


def save_after_step(
    state: TrainerState,
    cfg: AsyncRLSettings,
    done: int,
    stop_after: int | None,
    prober: StepProbe | None,
    extra: dict[str, Any],
    tensors: dict[str, dict[str, torch.Tensor]] | None,
) -> bool:
    """Save the resumable state when due, or after a probe (the state names the best probed
    weights); once saved, the keeper's other files go. True when the loop must stop."""
    stop = state.checkpoint_if_due(
        done, cfg.steps, cfg.checkpoint_every, stop_after, extra=extra, tensors=tensors
    )
    saved = stop or (done % cfg.checkpoint_every == 0 and done < cfg.steps)
    if prober is not None and prober.due(done) and not saved and done < cfg.steps:
        state.save(done, extra, tensors)
        saved = True
    if prober is not None and saved:
        prober.saved()
    return stop


def train_async_rl(
    model: torch.nn.Module,
    orch: Orchestrator,
    workers: Any,
    cfg: AsyncRLSettings,
    out_dir: Path,
    *,
    pad_id: int,
    stop_after: int | None = None,
    desc: str = "agentic rl",
    probe: Probe | None = None,
    temperatures: dict[str, float] | None = None,
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
) -> list[dict]:
    """Train `model` on batches from `orch` while `workers` (LocalWorkers or RayWorkers) roll out.

    Args:
        model: the trainer's policy (updated in place); the workers' engines start with the
            same weights.
        orch: the orchestrator (tau, sync_every, the mixture and the group size are set
            there; each batch carries its group size).
        workers: has start(), stop() and push_weights(state_dict, version, timeout).
        stop_after: stop after this many steps (state saved), to test resume.
        probe: with `cfg.probe`, scores the model on dev tasks (see the stage's ProbeCfg); rows go to
            probe.jsonl and the model ends on the weights `cfg.probe.keep` picks (kept_probe).
        temperatures: pool -> its sampling temperature where pools sample at their own
            (the agentic stage's per-source temperature; the workers must sample so); with
            `cfg.tempered_logprobs` the trainer scores each row at its pool's.
        logging: where metrics go besides metrics.jsonl (None: metrics.jsonl only).
        run_name: the name W&B / trackio show for this run (default: out_dir's name).
    Returns:
        the metric rows logged by this call.
    """
    opt = build_optimizer(model, cfg.optim)
    state = TrainerState(out_dir, model, opt)
    start, version = state.step, state.info.get("version", 0)
    if state.resumed:
        orch.restore(state.info["orchestrator"])
        workers.push_weights(policy_state_dict(model, clone=True), version, cfg.weight_sync_timeout)
    # resumed from the state's average; a fresh one starts at w_0
    ema = WeightEMA(model, cfg.weight_ema, state.tensors("ema")) if cfg.weight_ema > 0 else None
    sink = MetricSink(
        logging or LoggingCfg(), out_dir, name=run_name, resume_step=state.metrics_resume_step
    )
    prober = None
    if probe is not None and cfg.probe:
        resume_step, best = state.metrics_resume_step, state.info.get("best")
        prober = StepProbe(probe, cfg.probe, out_dir, cfg.steps, resume_step, best, ema)
        if not state.resumed:
            prober.run(model, 0)
    temps = temperatures if cfg.tempered_logprobs else None
    rows: list[dict] = []
    t_begin, waited, n_trajs = time.monotonic(), 0.0, 0
    model.train()
    workers.start()
    try:
        with progress(cfg.steps, desc, start=start) as bar:
            for step in range(start, cfg.steps):
                t0 = time.monotonic()
                batch = orch.next_batch(cfg.batch_timeout)
                t_wait = time.monotonic() - t0
                t1 = time.monotonic()
                tb, bstats = batch_tensors(batch, pad_id, temps)
                stats = train_step(model, opt, tb, cfg, step)
                if ema:
                    ema.update(model)
                t_train = time.monotonic() - t1
                done, t_sync = step + 1, 0.0
                if done % cfg.sync_every == 0:
                    version += 1
                    pushed = policy_state_dict(model, clone=True)
                    t_sync = workers.push_weights(pushed, version, cfg.weight_sync_timeout)
                    if cfg.reset_optimizer:
                        opt.state.clear()  # Adam's moments remember gradients of older policies
                waited, n_trajs = waited + t_wait, n_trajs + bstats["trajectories"]
                wall = time.monotonic() - t_begin
                row = {
                    "step": done,
                    "version": version,
                    **bstats,
                    **{k: v for k, v in orch.stats().items() if k != "version"},
                    "wait_s": t_wait,
                    "train_s": t_train,
                    "sync_s": t_sync,
                    "step_s": time.monotonic() - t0,
                    "idle_frac": waited / max(1e-9, wall),
                    "trajectories_per_s": n_trajs / max(1e-9, wall),
                    "trained_tokens": tb.n_tokens,
                    "lr": lr_at(step, cfg.steps, cfg.optim),
                    **stats,
                }
                rows.append(row)
                sink.log(done, row)
                if prober is not None and prober.due(done):
                    prober.run(model, done)
                extra = {
                    "version": version,
                    "orchestrator": orch.state(),
                    **(prober.state() if prober else {}),
                }
                tensors = {"ema": ema.avg} if ema else None
                stop = save_after_step(state, cfg, done, stop_after, prober, extra, tensors)
                bar.update(done, reward=bstats["reward_mean"], v=version)
                if stop:
                    break
    finally:
        workers.stop()
        sink.close()
    if done_all(rows, start, cfg.steps):
        if ema:
            model.load_state_dict(ema.avg)  # the stage ends on the average (or an earlier best)
        if prober is not None:
            prober.select(model)  # the weights of the probed step `probe.keep` picks
    model.eval()
    return rows


def done_all(rows: list[dict], start: int, steps: int) -> bool:
    """Whether the loop reached its last step (not stopped early to test resume)."""
    return (rows[-1]["step"] if rows else start) >= steps
