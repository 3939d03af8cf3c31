"""Synchronous reasoning RL: GRPO advantages, IcePop on the train/inference mismatch.

One step of `train_rl`:
    rollout   prompts_per_step prompts × group_size samples from the inference engine, with
              the engine's logprobs (the engine holds its own, possibly int8/bf16, weights)
    reward    a scorer turns each completion into a Reward (RLVR: 0/1 by a verifier)
    filter    dynamic sampling: groups whose rewards are all equal carry no signal; they are
              dropped and refilled with fresh prompts, up to max_refill_tries times (counted).
              Overlong masking: a completion cut by max_new_tokens gets no loss (counted); it
              still counts in its group's baseline, which needs fixed-size groups
    advantage group_advantages (GRPO, mean baseline, no std normalization by default)
    loss      logp_old recomputed by the trainer (no grad), then a micro-batched policy loss
              picked by name (grpo_icepop: clip + IcePop pop(ρ), ρ = π_train_old / π_infer;
              `icepop_beta: null` runs the clipped loss without IcePop),
              optional k3 KL to a frozen reference (off by default, as in GLM-5)
    step      AdamW step, then weight sync: engine.load_weights(model, version + 1)
    log/save  metrics.jsonl (and the run's other metric sinks); resumable state (weights,
              optimizer, step, prompt cursor, RNG, engine version) through arcforge.train.resume

Routing replay (`routing_replay`, an MoE policy with the LocalEngine recording routing): each
completion carries the experts every router picked while it was generated, and the policy's
forwards in `policy_backward` (logp_old and the loss's) are run with those experts forced
(arcforge.model.moe.replay_routing): the importance ratio then compares the same experts at
rollout and in training, and the gate weights still come from the trainer's router.

Prompts come from a `PromptStream`: a seeded permutation per epoch indexed by a cursor, so a
resumed run continues with exactly the prompts it had not used. Sampling seeds are a function
of (seed, step, try): a resumed step samples what the uninterrupted run would have.
Deliberate simplifications: one optimizer step per rollout batch (fully on-policy apart from the
engine mismatch); prompts longer than the context are not truncated (the engine raises).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

import torch

from arcforge.config import LossCfg, OptimCfg
from arcforge.device import model_device, to_device
from arcforge.metrics import LoggingCfg
from arcforge.model.moe import RoutingRecord, replay_routing
from arcforge.progress import progress
from arcforge.rl.advantages import dynamic_sampling_mask, group_advantages
from arcforge.rl.losses import POLICY_LOSSES, kl_penalty
from arcforge.rollout.engines.base import Completion, Engine, SamplingParams
from arcforge.rollout.prompts import RLPrompt, Scorer
from arcforge.train.lora import policy_state_dict
from arcforge.train.on_policy import open_policy_run, optimizer_step
from arcforge.train.rollout_batch import (
    TokenBatch,
    pad_trajectories,
    sequence_logprobs,
    sequence_weighted,
    trajectory_from_completion,
)


class GRPOSettings(Protocol):
    """What `train_rl` reads of its config (the rl and general_rl stages', arcforge.stages.rl
    and arcforge.stages.general_rl), besides the `LossCfg` fields `policy_backward` reads
    (the stage configs are LossCfg models). An optional `routing_replay` (the rl stage's; read
    with getattr, False when absent) replays each completion's recorded MoE routing."""

    seed: int
    steps: int
    prompts_per_step: int
    group_size: int
    temperature: float
    top_p: float
    max_new_tokens: int
    max_refill_tries: int
    baseline: str  # mean or leave_one_out
    std_normalize: bool
    optim: OptimCfg
    checkpoint_every: int


class PromptStream:
    """prompts[perm_epoch[i]] for a global cursor i; a pure function of (seed, cursor)."""

    def __init__(self, prompts: list[RLPrompt], seed: int) -> None:
        if not prompts:
            raise ValueError("PromptStream needs at least one prompt")
        self.prompts, self.seed, self._perm = prompts, seed, (-1, None)

    def take(self, cursor: int, n: int) -> list[RLPrompt]:
        out = []
        for i in range(cursor, cursor + n):
            epoch, j = divmod(i, len(self.prompts))
            if self._perm[0] != epoch:
                g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
                self._perm = (epoch, torch.randperm(len(self.prompts), generator=g).tolist())
            out.append(self.prompts[self._perm[1][j]])
        return out


@dataclass
class Rollouts:
    """The groups one step trains on, plus what was sampled and dropped on the way."""

    batch: TokenBatch | None
    rewards: list[float] = field(default_factory=list)  # every sampled completion (all tries)
    counts: dict[str, int] = field(default_factory=dict)
    gen_tokens: int = 0
    cursor: int = 0
    # with routing replay: each batch row's recorded routing (`Completion.routing`)
    routing: list[list[torch.Tensor]] | None = None


def sampling_seed(seed: int, step: int, attempt: int) -> int:
    """Row r of a generate call samples with seed + r; rows stay < 10_000 per call."""
    return seed * 1_000_000_007 + step * 100_000 + attempt * 10_000


def collect_rollouts(
    engine: Engine,
    stream: PromptStream,
    cursor: int,
    scorer: Scorer,
    cfg: GRPOSettings,
    step: int,
    stop_ids: list[int],
    pad_id: int,
) -> Rollouts:
    """Sample, score, drop uniform groups (refilling them) and mask overlong completions."""
    G, need = cfg.group_size, cfg.prompts_per_step
    trajs, kept_r, all_r, gen_tokens = [], [], [], 0
    replay = getattr(cfg, "routing_replay", False)
    routing: list[list[torch.Tensor]] = []
    counts = {"groups_sampled": 0, "dropped_uniform": 0, "dropped_overlong": 0, "refills": 0}
    for attempt in range(cfg.max_refill_tries + 1):
        if attempt:
            counts["refills"] += 1
        prompts = stream.take(cursor, need)
        cursor += need
        params = SamplingParams(
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            stop_token_ids=tuple(stop_ids),
            n=G,
            seed=sampling_seed(cfg.seed, step, attempt),
        )
        comps = engine.generate([p.ids for p in prompts], params)  # prompt-major, n adjacent
        rewards = [r.score for r in scorer([p for p in prompts for _ in range(G)], comps)]
        r = torch.tensor(rewards, dtype=torch.float)  # (need * G,)
        keep = dynamic_sampling_mask(r, G).view(-1, G)[:, 0]  # (need,)
        all_r += rewards
        gen_tokens += sum(len(c.token_ids) for c in comps)
        counts["groups_sampled"] += need
        counts["dropped_uniform"] += int((~keep).sum())
        for gi in keep.nonzero().flatten().tolist():
            for c in comps[gi * G : (gi + 1) * G]:
                trajs.append(trajectory_from_completion(prompts[gi].ids, c, engine.version))
                if replay:
                    routing.append(_recorded_routing(c))
            kept_r += rewards[gi * G : (gi + 1) * G]
        need = cfg.prompts_per_step - len(kept_r) // G
        if need == 0:
            break
    out = Rollouts(None, all_r, counts, gen_tokens, cursor, routing if replay else None)
    if not trajs:
        return out
    batch = pad_trajectories(trajs, pad_id)
    batch.advantages = group_advantages(torch.tensor(kept_r), G, cfg.baseline, cfg.std_normalize)
    overlong = torch.tensor([t.finish_reason == "length" for t in trajs])  # (B,)
    batch.mask[overlong] = 0.0  # dropped whole: no token of it is trained
    counts["dropped_overlong"] = int(overlong.sum())
    out.batch = batch
    return out


def _recorded_routing(completion: Completion) -> list[torch.Tensor]:
    if completion.routing is None:
        raise ValueError(
            "routing_replay: the engine returned a completion without its routing (it needs "
            "a LocalEngine built with record_routing, engine.kind local)"
        )
    return completion.routing


def replay_record(
    routing: list[list[torch.Tensor]], seq_len: int, micro_batch: int = 0
) -> RoutingRecord:
    """The `RoutingRecord` that replays `routing` (each row's per-router experts, as
    `Completion.routing`) in forwards over `micro_batch` rows at a time (0: one forward) of a
    right-padded batch `seq_len` columns wide; a row's routing past `seq_len` is cut (its
    tokens there are outside the forward)."""
    step = micro_batch or len(routing)
    calls = []
    for i in range(0, len(routing), step):
        rows = [[experts[:seq_len] for experts in row] for row in routing[i : i + step]]
        calls.append(RoutingRecord.from_sequences(rows, seq_len).experts)
    return RoutingRecord([[call[r][0] for call in calls] for r in range(len(routing[0]))])


def _replaying(
    model: torch.nn.Module,
    routing: list[list[torch.Tensor]] | None,
    seq_len: int,
    micro_batch: int = 0,
):
    """`replay_routing` of the rows' recorded routing (a no-op context without routing)."""
    if routing is None:
        return nullcontext()
    return replay_routing(model, replay_record(routing, seq_len, micro_batch))


# Each policy loss by name, called on one micro-batch (logp has grad, the rest are tensors).
# grpo_icepop with `icepop_beta: None` runs without IcePop (no train/inference correction).
LOSS_CALLS: dict[str, Callable[[torch.Tensor, TokenBatch, LossCfg], tuple]] = {
    "grpo_icepop": lambda logp, mb, cfg: POLICY_LOSSES["grpo_icepop"](
        logp,
        mb.logp_old,
        mb.logp_infer,
        mb.advantages,
        mb.mask,
        cfg.clip_low,
        cfg.clip_high,
        cfg.icepop_beta,
    ),
    "double_sided_is": lambda logp, mb, cfg: POLICY_LOSSES["double_sided_is"](
        logp, mb.logp_infer, mb.advantages, mb.mask, cfg.clip_low, cfg.clip_high
    ),
}


def policy_backward(
    model: torch.nn.Module,
    batch: TokenBatch,
    cfg: LossCfg,
    ref_model: torch.nn.Module | None = None,
    *,
    temperature: float = 1.0,
    routing: list[list[torch.Tensor]] | None = None,
) -> dict[str, float]:
    """Recompute logp_old (and the reference), then accumulate the token-mean loss's gradient
    over micro-batches; returns token-weighted loss stats. With `cfg.loss_agg == "seq_mean"`
    the mask becomes per-trajectory weights first (`sequence_weighted`).

    Args:
        cfg: the loss settings (a stage config is a `LossCfg`).
        ref_model: the frozen reference of the k3 KL term (with `cfg.kl_coef` > 0).
        temperature: the logits are divided by it, as the engine did for the rollout logprobs
            (tempered logprobs, agentic RL; 1: raw); a batch with a `temperature` column
            (pools sampled at their own) is scored at each row's instead.
        routing: each row's recorded MoE routing (`Completion.routing`, routing replay): the
            policy's forwards (logp_old and the loss's) replay it; the reference's do not.
    """

    def temp(b: TokenBatch) -> float | torch.Tensor:  # what `b`'s logits are divided by
        return b.temperature if b.temperature is not None else temperature

    if cfg.loss_agg == "seq_mean":  # a reweighted copy: the caller's batch keeps its 0/1 mask
        batch = replace(batch, mask=sequence_weighted(batch.mask))
    total = max(1e-9, batch.mask.sum().item())  # the token mean's denominator: every row
    if ref_model is None or cfg.kl_coef == 0:
        # Every loss term is linear in the advantage, so a row whose advantages are all zero
        # (a group with one reward: an agent pool the policy never solves) adds nothing to the
        # gradient; it is left out of both forward passes and only counts in `total`.
        keep = batch.signal_rows()
        if len(keep) == 0:
            return {"loss": 0.0}
        if len(keep) < len(batch):
            batch = batch.rows(keep, trim=False)
            routing = None if routing is None else [routing[i] for i in keep.tolist()]
    if routing is not None and len(routing) != len(batch):
        raise ValueError(f"routing replay: {len(routing)} recorded rows for {len(batch)} rows")
    kept = max(1e-9, batch.mask.sum().item())  # the token stats are means over the kept rows
    with torch.no_grad():
        if cfg.loss == "grpo_icepop":  # the other losses compare against the rollout only
            width = batch.input_ids.shape[1]
            with _replaying(model, routing, width, cfg.micro_batch):
                batch.logp_old = sequence_logprobs(model, batch, cfg.micro_batch, temp(batch))
        if ref_model is not None:
            batch.logp_ref = sequence_logprobs(ref_model, batch, cfg.micro_batch, temp(batch))
    dev = model_device(model)  # the batch stays on the CPU; each micro-batch goes to the model
    stats: dict[str, float] = {}
    for i in range(0, len(batch), cfg.micro_batch):
        mb = to_device(batch.rows(slice(i, i + cfg.micro_batch)), dev)
        if mb.n_tokens == 0:
            continue
        rows = None if routing is None else routing[i : i + cfg.micro_batch]
        with _replaying(model, rows, mb.input_ids.shape[1]):
            logp = sequence_logprobs(model, mb, temperature=temp(mb))  # (b, t) with grad
        loss, st = LOSS_CALLS[cfg.loss](logp, mb, cfg)
        if ref_model is not None and cfg.kl_coef > 0:
            kl = kl_penalty(logp, mb.logp_ref, mb.mask)
            loss, st = loss + cfg.kl_coef * kl, {**st, "kl": kl.item()}
        mb_weight = mb.mask.sum().item()
        w = mb_weight / total  # the micro-batch's share of the batch's weight
        (loss * w).backward()
        stats["loss"] = stats.get("loss", 0.0) + w * loss.item()
        for k, v in st.items():
            stats[k] = stats.get(k, 0.0) + mb_weight / kept * v
    return stats


def _check_replay(engine: Engine) -> None:
    """Raise unless the engine records routing (a LocalEngine with `record_routing`, which it
    only accepts for a model with MoE routers)."""
    if not getattr(engine, "records_routing", False):
        raise ValueError(
            f"routing_replay needs the LocalEngine recording routing (record_routing=True, "
            f"engine.kind local); got {type(engine).__name__} without it"
        )


def train_rl(
    model: torch.nn.Module,
    engine: Engine,
    prompts: list[RLPrompt],
    scorer: Scorer,
    cfg: GRPOSettings,
    out_dir: Path,
    *,
    pad_id: int,
    stop_ids: list[int],
    stop_after: int | None = None,
    desc: str = "rl",
    logging: LoggingCfg | None = None,
    run_name: str | None = None,
) -> list[dict]:
    """Run `cfg.steps` GRPO steps on `model`, syncing weights into `engine` after each.

    Args:
        model: the trainer's fp32 policy (updated in place).
        engine: the rollout engine; it must start with the same weights as `model`.
        prompts: the problem pool; scorer: rewards for completions of those prompts.
        stop_ids: token ids that end a completion (<|end|>, EOS).
        stop_after: stop after this many steps (state saved), to test resume.
        logging: where metrics go besides metrics.jsonl (None: metrics.jsonl only).
        run_name: the name W&B / trackio show for this run (default: out_dir's name).
    Returns:
        the metric rows logged by this call.
    """
    if getattr(cfg, "routing_replay", False):
        _check_replay(engine)
    stream = PromptStream(prompts, cfg.seed)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    opt, state, sink = open_policy_run(model, engine, cfg.optim, out_dir, logging, run_name)
    start, cursor = state.step, state.info.get("cursor", 0)
    rows: list[dict] = []
    model.train()
    with sink, progress(cfg.steps, desc, start=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.time()
            ro = collect_rollouts(engine, stream, cursor, scorer, cfg, step, stop_ids, pad_id)
            cursor, t_gen = ro.cursor, time.time() - t0
            stats: dict[str, float] = {}
            if ro.batch is not None and ro.batch.n_tokens > 0:
                backward = partial(policy_backward, model, ro.batch, cfg, ref, routing=ro.routing)
                stats = optimizer_step(model, opt, cfg, step, backward)
                engine.load_weights(policy_state_dict(model), engine.version + 1)
            done, dt = step + 1, time.time() - t0
            r = torch.tensor(ro.rewards)
            row = {
                "step": done,
                "reward_mean": r.mean().item(),
                "pass_rate": (r >= 1).float().mean().item(),
                **ro.counts,
                "trained_seqs": 0 if ro.batch is None else len(ro.batch),
                "trained_tokens": 0 if ro.batch is None else ro.batch.n_tokens,
                "gen_tokens_per_s": ro.gen_tokens / max(1e-9, t_gen),
                "tokens_per_s": ro.gen_tokens / max(1e-9, dt),
                "lr": opt.param_groups[0]["lr"],
                "engine_version": engine.version,
                **stats,
            }
            rows.append(row)
            sink.log(done, row)  # every step: RL steps are few and each is costly
            stop = state.checkpoint_if_due(
                done,
                cfg.steps,
                cfg.checkpoint_every,
                stop_after,
                extra={"cursor": cursor, "engine_version": engine.version},
            )
            bar.update(done, reward=row["reward_mean"])
            if stop:
                break
    model.eval()
    return rows
