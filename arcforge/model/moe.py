"""MoE routing in transformers' `glm_moe_dsa`: expert-load statistics, aux-loss-free balancing
and routing replay.

transformers' `GlmMoeDsaTopkRouter` scores experts with `s = sigmoid(W h)`, picks the top
`num_experts_per_tok` of `s + e_score_correction_bias` (within the best groups), and weights the
picked experts by `s` alone (normalised, times `routed_scaling_factor`): the bias moves only the
selection, never the gate weights. DeepSeek-V3's aux-loss-free balancing uses exactly that:
after each optimizer step, per router,

    b_e += gamma * sign(mean_e' load_e' - load_e)

where `load_e` is the number of tokens routed to expert e during the step: overloaded experts
become less likely to be picked, idle ones more, with no auxiliary loss in the gradient. The bias
is a buffer, so it is saved with the checkpoint and transformers loads it as it is.

`ExpertLoad` counts tokens per expert per MoE layer with forward hooks on the routers (the
metrics: max/mean imbalance per layer); `AuxFreeBalancer` adds the bias update. Routing replay
records each router's selected experts in one forward (`record_routing`) and forces them in a
later forward over the same tokens (`replay_routing`), recomputing the gate weights from the
current router scores as transformers does: RL's importance ratio then compares the same experts
at rollout and in training, and the router still gets its gradient through the gate weights.
All of it is hooks on the stock modules: the model class, its forward and its checkpoints stay
transformers' own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaTopkRouter

from arcforge.metrics import Closing


def routers(model: nn.Module) -> list[GlmMoeDsaTopkRouter]:
    """The model's MoE routers in layer order (none for a model without MoE)."""
    return [m for m in model.modules() if isinstance(m, GlmMoeDsaTopkRouter)]


def bias_update(load: torch.Tensor, gamma: float) -> torch.Tensor:
    """DeepSeek-V3's aux-loss-free step for one router: `gamma * sign(mean(load) - load)`.

    Args:
        load: (E,) tokens routed to each expert since the last update.
        gamma: the bias update speed.
    Returns:
        (E,) float32 increment of `e_score_correction_bias` (+gamma for an underloaded expert,
        -gamma for an overloaded one, 0 at exactly the mean).
    """
    load = load.float()
    return gamma * torch.sign(load.mean() - load)


def load_stats(counts: torch.Tensor) -> dict[str, float]:
    """Imbalance metrics of (L, E) token counts (L MoE layers, E experts).

    Returns:
        `moe_imbalance_l<i>`: max/mean load of layer i (1.0 is perfectly balanced, E/k the
        worst: every token on the same k experts); `moe_imbalance_max`/`_mean` over layers;
        `moe_idle_experts`: experts that got no token, summed over layers.
    """
    counts = counts.float()
    imb = counts.max(-1).values / counts.mean(-1).clamp_min(1e-9)  # (L,)
    out = {f"moe_imbalance_l{i}": v for i, v in enumerate(imb.tolist())}
    out["moe_imbalance_max"] = float(imb.max()) if len(imb) else 1.0
    out["moe_imbalance_mean"] = float(imb.mean()) if len(imb) else 1.0
    out["moe_idle_experts"] = float((counts == 0).sum())
    return out


class ExpertLoad(Closing):
    """Counts the tokens each router sends to each expert (forward hooks on the routers).

    `counts` is (L, E): L routers in layer order, E experts, on the routers' device (so that
    counting never waits for the accelerator); `reset()` zeroes it. With `train_only`,
    forwards in eval mode (held-out losses, generation) are not counted.
    """

    def __init__(self, model: nn.Module, train_only: bool = False) -> None:
        self.routers = routers(model)
        n_exp = self.routers[0].num_experts if self.routers else 0
        self.counts = torch.zeros(len(self.routers), n_exp, dtype=torch.long)
        self.train_only = train_only
        self._handles = [r.register_forward_hook(self._hook(i)) for i, r in enumerate(self.routers)]

    def _hook(self, i: int):
        def hook(router: nn.Module, _args: tuple, out: tuple) -> None:
            if self.train_only and not router.training:
                return
            idx = out[2].detach().reshape(-1)  # (N * k,)
            if self.counts.device != idx.device:
                self.counts = self.counts.to(idx.device)
            self.counts[i] += torch.bincount(idx, minlength=self.counts.shape[1])

        return hook

    def reset(self) -> None:
        self.counts.zero_()

    def stats(self) -> dict[str, float]:
        """`load_stats` of the counts so far."""
        return load_stats(self.counts)

    def pop(self) -> dict[str, float]:
        """`load_stats` of the counts since the last `pop` or `reset`, then zero them."""
        stats = self.stats()
        self.reset()
        return stats

    def close(self) -> None:
        for h in self._handles:
            h.remove()


class AuxFreeBalancer:
    """Aux-loss-free load balancing: call `step()` after each optimizer step.

    Counts the tokens routed in training forwards since the last call, adds
    `bias_update(load, gamma)` to each router's `e_score_correction_bias`, and returns the
    step's `load_stats` (so they go into the metrics). `load` is the train-only `ExpertLoad`
    to read (a training loop's own, whose counts `step()` then zeroes); default a new one.
    """

    def __init__(
        self, model: nn.Module, gamma: float = 1e-3, load: ExpertLoad | None = None
    ) -> None:
        if gamma <= 0:
            raise ValueError(f"gamma must be > 0, got {gamma}")
        self.gamma = gamma
        self.load = ExpertLoad(model, train_only=True) if load is None else load

    @torch.no_grad()
    def step(self) -> dict[str, float]:
        for router, load in zip(self.load.routers, self.load.counts):
            bias = router.e_score_correction_bias  # a router that saw no token moves by 0
            bias += bias_update(load, self.gamma).to(bias.device, bias.dtype)
        return self.load.pop()

    def close(self) -> None:
        self.load.close()


@dataclass
class RoutingRecord:
    """Selected experts per router and forward: `experts[i][j]` is the (N, k) int64 expert ids
    of router i (layer order) in the j-th recorded forward, N tokens in (batch, position)
    order."""

    experts: list[list[torch.Tensor]] = field(default_factory=list)

    def sequences(self, batch_size: int) -> list[list[torch.Tensor]]:
        """Split the recorded forwards into rows: `out[b][i]` is router i's (T, k) experts for
        row b of the concatenated forwards (each forward's tokens in (B_j, T) order, B_j rows
        summing to `batch_size`, one sequence length T)."""
        per_router = [torch.cat(calls) for calls in self.experts]  # (batch_size * T, k) each
        rows = [e.view(batch_size, -1, e.shape[-1]) for e in per_router]  # (B, T, k) each
        return [[r[b] for r in rows] for b in range(batch_size)]

    @staticmethod
    def from_sequences(rows: list[list[torch.Tensor]], seq_len: int) -> RoutingRecord:
        """One forward's record for a right-padded (B, seq_len) batch of recorded rows:
        `rows[b][i]` is router i's (L_b, k) experts for row b (L_b <= seq_len). Padding
        positions get experts 0..k-1: their outputs never reach a trained token."""
        n_routers, k = len(rows[0]), rows[0][0].shape[-1]
        out = []
        for i in range(n_routers):
            batch = torch.arange(k).repeat(len(rows), seq_len, 1)  # (B, seq_len, k)
            for b, row in enumerate(rows):
                batch[b, : row[i].shape[0]] = row[i]
            out.append([batch.view(-1, k)])  # (B * seq_len, k)
        return RoutingRecord(out)


@contextmanager
def record_routing(model: nn.Module) -> Iterator[RoutingRecord]:
    """Record the experts every router selects in the forwards run inside the block."""
    rs = routers(model)
    rec = RoutingRecord([[] for _ in rs])

    def hook(i: int):
        return lambda _m, _a, out: rec.experts[i].append(out[2].detach().clone())

    handles = [r.register_forward_hook(hook(i)) for i, r in enumerate(rs)]
    try:
        yield rec
    finally:
        for h in handles:
            h.remove()


def _replayed_weights(router: GlmMoeDsaTopkRouter, logits: torch.Tensor, idx: torch.Tensor):
    """transformers' gate weights for the experts `idx` (N, k): sigmoid scores of the picked
    experts, normalised when `norm_topk_prob`, times `routed_scaling_factor`."""
    w = logits.sigmoid().gather(1, idx)  # (N, k)
    if router.norm_topk_prob:
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return w * router.routed_scaling_factor


@contextmanager
def replay_routing(model: nn.Module, record: RoutingRecord) -> Iterator[None]:
    """Force the recorded experts in the forwards run inside the block, one recorded forward
    per forward, in order; the gate weights come from the current router scores.

    Raises:
        ValueError: a forward routes a different number of tokens than the one recorded, or
            there are more forwards than recorded ones.
    """
    rs = routers(model)
    if len(record.experts) != len(rs):
        raise ValueError(f"routing record has {len(record.experts)} routers, model {len(rs)}")
    cursor = [0] * len(rs)

    def hook(i: int):
        def replace(router: GlmMoeDsaTopkRouter, _args: tuple, out: tuple) -> tuple:
            logits = out[0]  # (N, E)
            if cursor[i] >= len(record.experts[i]):
                raise ValueError(f"routing replay: router {i} has no recorded forward left")
            idx = record.experts[i][cursor[i]].to(logits.device)  # (N, k)
            cursor[i] += 1
            if idx.shape[0] != logits.shape[0]:
                raise ValueError(
                    f"routing replay: router {i} recorded {idx.shape[0]} tokens, "
                    f"this forward routes {logits.shape[0]}"
                )
            return logits, _replayed_weights(router, logits, idx).to(out[1].dtype), idx

        return replace

    handles = [r.register_forward_hook(hook(i)) for i, r in enumerate(rs)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
