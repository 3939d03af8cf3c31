"""Optimizers by name (AdamW, Muon, and Muon Split: per-head Muon for MLA's up-projections) and
the learning-rate schedule every trainer follows.

`build_optimizer(model, cfg)` picks by `cfg.name`:

- `adamw`: AdamW, weight decay on matrices only.
- `muon`: Muon for the hidden matrices, AdamW for what Muon is not meant for (embeddings, the
  LM head, MoE routers, norms, biases). Muon's step is
  `W -= lr * 0.2 * sqrt(max(A, B)) * NS(nesterov_momentum(G))`, the Moonlight scaling that
  torch's Muon calls `adjust_lr_fn="match_rms_adamw"`, so one learning rate and schedule serve
  both halves. A fused MoE tensor `(E, out, in)` is E matrices, orthogonalised one by one.
- `muon_split`: as `muon`, but MLA's up-projections (`q_b_proj`, `kv_b_proj`: rows grouped by
  attention head) are orthogonalised per head, as GLM-5 does, rather than as one matrix.

`BlockMuon` is torch.optim.Muon's algorithm (the same Nesterov momentum, quintic Newton-Schulz
coefficients, weight decay and lr scaling; a test holds the two together) with two changes:
the update of a parameter is split into blocks before the iteration (per head, per expert),
which torch's Muon cannot do (2-D parameters only, no hook on the update), and the iteration
runs batched in fp32 where torch's casts to bf16, which CPUs without bf16 units emulate: on the
busy 2-core dev machine a 128x128 bf16 matmul is ~80x slower than fp32, and torch's Muon took ~1 s
per step for 0.24M parameters. The two optimizers are stepped together by `JointOptimizer`,
which looks like one optimizer to the training loops: `param_groups`, `zero_grad`, `step`,
`state`, `state_dict`.

`cfg.freeze_indexer` freezes DSA's lightning indexer (requires_grad off, left out of every
group): rollout and training then pick the same keys for the same context.

`lr_at(step, total, cfg)` is the schedule: linear warmup over `cfg.warmup_steps`, then cosine
decay to `cfg.lr * cfg.min_lr_ratio`. It is a pure function of the step, so a resumed run needs
no scheduler state (arcforge.train.resume); the trainers set it on every group before each step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from arcforge.config import OptimCfg
from arcforge.model.dsa import freeze_indexer

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's quintic Newton-Schulz
NS_STEPS = 5
SPLIT_PROJECTIONS = ("q_b_proj", "kv_b_proj")  # MLA up-projections: (heads * d, lora_rank)


def newton_schulz(g: torch.Tensor, steps: int = NS_STEPS, eps: float = 1e-7) -> torch.Tensor:
    """Approximately orthogonalise each matrix of `g` (..., m, n): U S V^T -> U S' V^T with
    S' near 1 (the quintic iteration of torch's Muon, batched over the leading dims)."""
    a, b, c = NS_COEFFS
    x = g.float()
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT  # iterate on the wide side: the Gram matrix is the smaller one
    x = x / x.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # spectral norm <= 1
    for _ in range(steps):
        gram = x @ x.mT  # (..., m, m)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return (x.mT if tall else x).to(g.dtype)


class BlockMuon(torch.optim.Optimizer):
    """Muon on equal blocks of each parameter: a group's `blocks` splits a 2-D parameter's
    rows into that many matrices (1: the whole matrix; heads: per head); a 3-D parameter is a
    batch of matrices (per expert). Decoupled weight decay, Nesterov momentum, lr scaled per
    block by 0.2 * sqrt(max(rows, cols)), as torch's Muon with `adjust_lr_fn="match_rms_adamw"`.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        blocks: int = 1,
    ) -> None:
        super().__init__(
            params, {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "blocks": blocks}
        )

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        for group in self.param_groups:
            lr, wd, mu, n = group["lr"], group["weight_decay"], group["momentum"], group["blocks"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - mu)
                update = p.grad.lerp(buf, mu)  # Nesterov
                if p.dim() == 2:
                    update = update.view(n, p.shape[0] // n, p.shape[1])  # (n, rows, cols)
                blocks = update  # (n or E, rows, cols)
                scale = 0.2 * math.sqrt(max(blocks.shape[-2:]))
                p.mul_(1 - lr * wd)
                p.add_(newton_schulz(blocks).reshape(p.shape), alpha=-lr * scale)
        return None


class _JointState(Mapping):
    """The per-parameter states of several optimizers as one mapping (`clear()` resets all)."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self._opts = optimizers

    def __getitem__(self, p: Any) -> Any:
        for o in self._opts:
            if p in o.state:
                return o.state[p]
        raise KeyError(p)

    def __iter__(self) -> Iterator[Any]:
        return (p for o in self._opts for p in o.state)

    def __len__(self) -> int:
        return sum(len(o.state) for o in self._opts)

    def clear(self) -> None:
        for o in self._opts:
            o.state.clear()


class JointOptimizer:
    """Several optimizers over disjoint parameters, stepped as one. `param_groups` is the list
    of all their groups (the same dicts, so setting `g["lr"]` reaches the inner optimizer)."""

    def __init__(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for o in self.optimizers for g in o.param_groups]

    @property
    def state(self) -> _JointState:
        return _JointState(self.optimizers)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for o in self.optimizers:
            o.step()

    def state_dict(self) -> dict[str, Any]:
        return {
            "joint": [type(o).__name__ for o in self.optimizers],
            "optimizers": [o.state_dict() for o in self.optimizers],
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        names = [type(o).__name__ for o in self.optimizers]
        if sd.get("joint") != names:
            raise ValueError(
                f"optimizer state holds {sd.get('joint') or 'one AdamW'}, this run builds "
                f"{names}: resume with the optim.name the state was written with"
            )
        for o, s in zip(self.optimizers, sd["optimizers"]):
            o.load_state_dict(s)


Optimizer = torch.optim.Optimizer | JointOptimizer


def lr_at(step: int, total: int, cfg: OptimCfg) -> float:
    """Linear warmup to cfg.lr, then cosine decay to cfg.lr * min_lr_ratio at `total`."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    span = max(1, total - cfg.warmup_steps)
    t = min(1.0, (step - cfg.warmup_steps) / span)
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1 + math.cos(math.pi * t))


def _adamw(params: list[nn.Parameter], cfg: OptimCfg) -> torch.optim.AdamW:
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=False)


def _adamw_only(model: nn.Module) -> set[int]:
    """ids of the matrices Muon is not for: embeddings, the output head, MoE routers."""
    out = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    get_out = getattr(model, "get_output_embeddings", None)
    head = get_out() if callable(get_out) else None
    out |= {id(p) for p in head.parameters()} if head is not None else set()
    for name, m in model.named_modules():
        if name.rsplit(".", 1)[-1] == "gate" or type(m).__name__.endswith("Router"):
            out |= {id(p) for p in m.parameters(recurse=False)}  # MoE router (not gate_proj)
    return out


def split_heads(model: nn.Module) -> dict[int, int]:
    """{id(weight): heads} for MLA's up-projections, whose rows are grouped by head."""
    heads = getattr(getattr(model, "config", None), "num_attention_heads", None)
    out = {}
    for name, m in model.named_modules():
        if heads and name.rsplit(".", 1)[-1] in SPLIT_PROJECTIONS and isinstance(m, nn.Linear):
            if m.weight.shape[0] % heads == 0:
                out[id(m.weight)] = heads
    return out


def build_optimizer(model: nn.Module, cfg: OptimCfg) -> Optimizer:
    """The optimizer `cfg.name` names over `model`'s trainable parameters (see module doc)."""
    if cfg.freeze_indexer:
        freeze_indexer(model)
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.name == "adamw":
        return _adamw(params, cfg)
    skip = _adamw_only(model)
    per_head = split_heads(model) if cfg.name == "muon_split" else {}
    muon = [p for p in params if p.dim() in (2, 3) and id(p) not in skip]
    rest = [p for p in params if p.dim() not in (2, 3) or id(p) in skip]
    groups = [{"params": [p for p in muon if id(p) not in per_head], "blocks": 1}]
    for n in sorted(set(per_head.values())):  # one group per head count
        groups.append({"params": [p for p in muon if per_head.get(id(p)) == n], "blocks": n})
    groups = [g for g in groups if g["params"]]
    opts: list[torch.optim.Optimizer] = []
    if groups:
        opts.append(
            BlockMuon(groups, lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.muon_momentum)
        )
    if rest:
        opts.append(_adamw(rest, cfg))
    return JointOptimizer(opts)
