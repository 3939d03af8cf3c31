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
    log/save  metrics.jsonl (idle fraction, staleness, drops, mixture); the resumable state
              holds weights, optimizer, RNG, step, version and the orchestrator's state
    average   optional (`weight_ema: d`): a Polyak average of the weights, avg <- d avg + (1 - d) w
              after every step from the stage's first weights; the engines keep sampling from
              the online weights, while the probe, the kept best and the stage's checkpoint
              take the average (its state is saved and resumed with the rest)
    probe     optional (`probe:`): greedy episodes on dev tasks (neither train nor test) at
              step 0, every `probe.every` steps and at the end, logged to probe.jsonl with
              each item's score; `probe.keep` picks the weights the stage ends on (see
              kept_probe). RL on a tiny model moves held-out suites up in one run and down in
              the next (two runs of one config can differ by 0.2 on TIR), so a stage
              that may only be kept when it helped measures that on items it neither trains
              nor reports on

Synchronous RL is the same code with tau = 0 and sync_every = 1: the orchestrator then admits
exactly one batch of jobs per version. Deliberate simplification: with sync_every > 1 a state
saved between pushes restores the trainer's newer weights into the engines under the saved
version number.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import load_file, save_file

from arcforge.config import OptimCfg
from arcforge.progress import progress
from arcforge.rewards.swarm import swarm_stats
from arcforge.rl.advantages import dynamic_sampling_mask, group_advantages
from arcforge.rollout.orchestrator import Batch, Orchestrator
from arcforge.stats import mean_ci
from arcforge.train.loop import (
    MetricsLog,
    build_optimizer,
    checkpoint_if_due,
    find_state,
    load_state,
    lr_at,
    save_state,
)
from arcforge.train.rl import policy_backward
from arcforge.train.rollout_batch import TokenBatch, pad_trajectories

OVERLONG = ("length", "context")


class ProbeSettings(Protocol):
    """What the trainer reads of a probe config (the agentic RL stage's ProbeCfg)."""

    every: int  # steps between probes (also at step 0 and the last step)
    keep: str  # which probed weights the stage ends on (kept_probe)


class AsyncRLSettings(Protocol):
    """What `train_async_rl` reads of its config (the agentic RL stage's,
    arcforge.stages.agentic_rl), besides the `LossCfg` fields `policy_backward` reads (the
    stage config is a LossCfg)."""

    steps: int
    group_size: int
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
    batch: Batch, group_size: int, pad_id: int, temperatures: dict[str, float] | None = None
) -> tuple[TokenBatch, dict]:
    """The batch as padded tensors with GRPO advantages and overlong rows masked, plus counts.
    With `temperatures` (pool -> the temperature its episodes were sampled at; tempered
    logprobs), each row's temperature is set so the trainer scores it as it was sampled.

    Returns:
        (TokenBatch, stats: trajectories, overlong, partial (several versions in one
        trajectory), staleness_max/mean, reward_mean, signal_frac (the share of groups with
        unequal rewards), and per pool its group count
        (groups_<pool>), mean reward (reward_<pool>), share of episodes that scored 1
        (solved_<pool>; below reward_ only with partial credit, e.g. call_credit), share of
        groups with unequal rewards (signal_<pool>) and trained tokens (tokens_<pool>)).
    """
    trajs = batch.trajectories
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


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


Probe = Callable[[torch.nn.Module], dict[str, list[float]]]  # model -> dev suite -> item scores


def best_probe(rows: list[dict]) -> dict | None:
    """The probe.jsonl row with the best mean, the earliest of equal ones (BestKeeper's rule)."""
    return max(rows, key=lambda r: (r["mean"], -r["step"]), default=None)


def probe_items(row: dict) -> list[float] | None:
    """A probe.jsonl row's item scores, suite after suite (None: a row written without them)."""
    suites = sorted(k for k in row if k.startswith("items_"))
    return [x for k in suites for x in row[k]] if suites else None


def kept_probe(rows: list[dict], keep: str) -> dict | None:
    """The probe.jsonl row whose weights a stage with `probe.keep = keep` ends on.

    "best" takes the best mean (the earliest of equal ones): an argmax over noisy dev scores,
    which favours whichever step the noise lifted. "last_unless_worse" takes the last probed
    step unless its paired change from the best one (item by item, the same dev tasks) lies
    below zero beyond its 95% interval: a guard against a run that fell, not a search for the
    luckiest step. In a 90-step run with dev TIR 0.71, 0.74, 0.74, 0.70 at steps 0-90, "best"
    kept step 30 (held out +0.043, within its interval) where step 90's weights scored +0.087,
    beyond it; a run with dev TIR 0.71, 0.73, 0.71, 0.55 is the case the guard is for: its
    step 90 lost 0.037 held out (docs/experiments.md, "Probe and step selection")."""
    if not rows:
        return None
    best, last = best_probe(rows), max(rows, key=lambda r: r["step"])
    if keep == "best":
        return best
    if keep == "last" or best is last:
        return last
    a, b = probe_items(last), probe_items(best)
    if a is None or b is None or len(a) != len(b):
        return best  # no paired items to test the fall on: the best mean
    _, _, hi = mean_ci([x - y for x, y in zip(a, b)])
    return best if hi < 0 else last


class BestKeeper:
    """The probed step with the best mean score and its weights, in probe/best-<step>.safetensors.

    A new best's file is written before the trainer state that names it, and older files are
    removed only after that state is saved, so a resumed run always finds the file its state
    names (files of a step the resumed state never saw are removed on resume)."""

    def __init__(self, out_dir: Path, state: dict | None):
        self.dir = out_dir / "probe"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.step, self.score = (state or {}).get("step", -1), (state or {}).get("score", -1.0)
        self.prune()

    def path(self, step: int) -> Path:
        return self.dir / f"best-{step}.safetensors"

    def offer(self, model: torch.nn.Module, step: int, score: float) -> bool:
        """Keep `model`'s weights when `score` beats the best so far (ties keep the earlier)."""
        if score <= self.score:
            return False
        self._save(model, self.path(step))
        self.step, self.score = step, score
        return True

    def keep_last(self, model: torch.nn.Module, step: int) -> None:
        """Set the last step's weights aside (probe/last-<step>) before an earlier best wins."""
        self._save(model, self.dir / f"last-{step}.safetensors")

    @staticmethod
    def _save(model: torch.nn.Module, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        save_file({k: v.contiguous() for k, v in _weights(model).items()}, str(tmp))
        tmp.replace(path)

    def state(self) -> dict:
        return {"step": self.step, "score": self.score}

    def prune(self) -> None:
        for f in self.dir.glob("best-*"):
            if f.name != self.path(self.step).name:
                f.unlink()

    def restore(self, model: torch.nn.Module) -> None:
        model.load_state_dict(load_file(str(self.path(self.step))))


class WeightEMA:
    """A Polyak (exponential moving) average of the trainer's weights:

        avg_0 = w_0,   avg_t = d · avg_(t-1) + (1 − d) · w_t        (after every trainer step)

    The episodes must come from the policy being trained, so the engines keep the online
    weights w_t; what the stage evaluates and ends on is the average. On the tiny demo model
    one step moves greedy dev TIR by up to 0.2 (0.68, 0.45, 0.67, 0.72, 0.52 at steps 0-24 in
    one run) where the sampled reward rises slowly; averaging the iterates keeps the direction
    they share and damps the step-to-step noise (tail averaging of SGD, as in SWA /
    EMA-of-weights). Measured once at d 0.9: a smoother dev curve, no held-out gain over the
    last iterate; hence off by default (docs/experiments.md, "Weight EMA")."""

    def __init__(
        self, model: torch.nn.Module, decay: float, saved: dict[str, torch.Tensor] | None = None
    ) -> None:
        self.decay = decay
        self.avg = _weights(model) if saved is None else saved

    def update(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if v.is_floating_point():
                    self.avg[k].lerp_(v, 1.0 - self.decay)
                else:
                    self.avg[k].copy_(v)

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """The model holds the average inside the block and its online weights after it."""
        online = _weights(model)
        model.load_state_dict(self.avg)
        try:
            yield
        finally:
            model.load_state_dict(online)


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
) -> list[dict]:
    """Train `model` on batches from `orch` while `workers` (LocalWorkers or RayWorkers) roll out.

    Args:
        model: the trainer's policy (updated in place); the workers' engines start with the
            same weights.
        orch: the orchestrator (tau, sync_every and the mixture are set there).
        workers: has start(), stop() and push_weights(state_dict, version, timeout).
        stop_after: stop after this many steps (state saved), to test resume.
        probe: with `cfg.probe`, scores the model on dev tasks (see the stage's ProbeCfg); rows go to
            probe.jsonl and the model ends on the weights `cfg.probe.keep` picks (kept_probe).
        temperatures: pool -> its sampling temperature where pools sample at their own
            (the agentic stage's per-source temperature; the workers must sample so); with
            `cfg.tempered_logprobs` the trainer scores each row at its pool's.
    Returns:
        the metric rows logged by this call.
    """
    opt = build_optimizer(model, cfg.optim)
    state, start, version = find_state(out_dir), 0, 0
    if state:
        info = load_state(state, model, opt)
        start, version = info["step"], info["version"]
        orch.restore(info["orchestrator"])
        workers.push_weights(_weights(model), version, cfg.weight_sync_timeout)
    ema = None
    if cfg.weight_ema > 0:  # resumed from the state's average; a fresh one starts at w_0
        saved = state / "ema.safetensors" if state else None
        ema = WeightEMA(
            model, cfg.weight_ema, load_file(str(saved)) if saved and saved.exists() else None
        )
    log = MetricsLog(out_dir / "metrics.jsonl", resume_step=start if state else None)
    pcfg = cfg.probe if probe is not None else None
    if pcfg:
        plog = MetricsLog(out_dir / "probe.jsonl", resume_step=start if state else None)
        best = BestKeeper(out_dir, info.get("best") if state else None)

        def run_probe(done: int) -> None:
            t0 = time.monotonic()
            with ema.applied(model) if ema else nullcontext():  # what the stage would end on
                items = probe(model)
                scores = {k: sum(v) / max(1, len(v)) for k, v in items.items()}
                mean_score = round(sum(scores.values()) / len(scores), 9)  # equal means tie
                new = best.offer(model, done, mean_score)
            plog.write(
                step=done,
                mean=mean_score,
                best=new,
                probe_s=time.monotonic() - t0,
                **{f"probe_{k}": v for k, v in scores.items()},
                **{f"items_{k}": v for k, v in items.items()},
            )
            print(
                f"[probe] step {done}: "
                + " ".join(f"{k}={v:.3f}" for k, v in scores.items())
                + f" mean={mean_score:.3f}"
                + (" (best)" if new else "")
            )

        if not state:
            run_probe(0)
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
                tb, bstats = batch_tensors(
                    batch, cfg.group_size, pad_id, temperatures if cfg.tempered_logprobs else None
                )
                for g in opt.param_groups:
                    g["lr"] = lr_at(step, cfg.steps, cfg.optim)
                opt.zero_grad(set_to_none=True)
                stats: dict[str, float] = {
                    "updated": float(has_signal(tb)),
                    "loss": 0.0,
                    "grad_norm": 0.0,
                }
                if stats["updated"]:
                    stats.update(policy_backward(model, tb, cfg))
                    stats["grad_norm"] = float(
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
                    )
                    opt.step()
                if ema:
                    ema.update(model)
                t_train = time.monotonic() - t1
                done, t_sync = step + 1, 0.0
                if done % cfg.sync_every == 0:
                    version += 1
                    t_sync = workers.push_weights(_weights(model), version, cfg.weight_sync_timeout)
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
                    "lr": opt.param_groups[0]["lr"],
                    **stats,
                }
                rows.append(row)
                log.write(**row)
                probed = bool(pcfg) and (done % pcfg.every == 0 or done == cfg.steps)
                if probed:
                    run_probe(done)
                extra = {
                    "version": version,
                    "orchestrator": orch.state(),
                    **({"best": best.state()} if pcfg else {}),
                }
                tensors = {"ema": ema.avg} if ema else None
                stop = checkpoint_if_due(
                    out_dir / "state",
                    model,
                    opt,
                    done,
                    cfg.steps,
                    cfg.checkpoint_every,
                    stop_after,
                    extra=extra,
                    tensors=tensors,
                )
                saved = stop or (done % cfg.checkpoint_every == 0 and done < cfg.steps)
                if probed and not saved and done < cfg.steps:  # the state names the best
                    save_state(out_dir / "state", model, opt, done, extra, tensors)
                    saved = True
                if pcfg and saved:  # the saved state names the best file: drop the others
                    best.prune()
                bar.update(done, reward=bstats["reward_mean"], v=version)
                if stop:
                    break
    finally:
        workers.stop()
    finished = done_all(rows, start, cfg.steps)
    if ema and finished:
        model.load_state_dict(ema.avg)  # the stage ends on the average (or an earlier best)
    if pcfg and pcfg.keep != "last" and finished and best.step >= 0:
        kept = kept_probe(plog.rows(), pcfg.keep)
        if kept is not None and kept["step"] == best.step != cfg.steps:
            best.keep_last(model, cfg.steps)
            best.restore(model)  # the weights of the best probed step
    model.eval()
    return rows


def done_all(rows: list[dict], start: int, steps: int) -> bool:
    """Whether the loop reached its last step (not stopped early to test resume)."""
    return (rows[-1]["step"] if rows else start) >= steps
