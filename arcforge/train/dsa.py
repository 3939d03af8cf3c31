"""DeepSeek Sparse Attention training: the lightning indexer's dense warm-up, then sparse training.

DSA's indexer picks the top-k keys per query without a gradient path from the LM loss (top-k
is not differentiable, and transformers runs the indexer under `no_grad`), so it learns only
from its own loss: the KL divergence from the main attention's distribution to its own,

    p_t = sum_h A_{h,t,:} / ||sum_h A_{h,t,:}||_1     (main attention, summed over heads)
    L_I = mean_t KL(p_{t,S_t} || softmax(I_{t,S_t}))

where `I_{t,s}` is the indexer's score of key s for query t and `S_t` the keys query t keeps.

1. Dense warm-up (`warmup_steps`): attention is dense (every layer's top-k covers the sequence,
   so `S_t` is every earlier key), only the indexers train, on `L_I` alone; every other weight
   is frozen and the forward runs under `no_grad` outside the indexer's scores.
2. Sparse training (`sparse_steps`): the top-k selection is in the forward pass, the main model
   trains on the LM loss and the indexer on `L_I` over the selected set. The indexer's inputs
   (the layer's hidden states and MLA's query latent) are detached, so `L_I` never reaches the
   main model, and the LM loss never reaches the indexer.

The learning rates follow GLM-5's shape: the indexer's decays linearly from `indexer_lr` to
`indexer_min_lr` over the warm-up and stays there in sparse training; the main model trains at
a constant `sparse_lr`.

Capture: `IndexerKL` registers a forward hook (with kwargs) on every attention layer that has
an indexer. The hook receives the layer's normed input, RoPE, causal mask and the top-k indices
the layer returned; it recomputes the main attention's probabilities from the layer's own
weights (under `no_grad`, over the keys the layer kept) and the indexer's scores (with grad,
from detached inputs), and records the KL. Hooks rather than a patched forward: transformers'
forward stays as it is (no copy to keep in step with it), and the probabilities do not depend
on the attention implementation (SDPA, the default, returns none). The price is one extra
query/key projection per layer, small beside the step at these sizes. A forward with a KV
cache holding earlier tokens (decoding) is not supported: the loss needs every key's query.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import apply_rotary_pos_emb_interleave

from arcforge.config import OptimCfg, Strict
from arcforge.device import model_device, to_device
from arcforge.errors import UserError
from arcforge.metrics import Closing
from arcforge.model.dsa import indexers
from arcforge.train.optim import build_optimizer


class DsaCfg(Strict):
    """DSA's two training phases (arcforge.train.dsa.run_dsa_phases)."""

    warmup_steps: int = Field(50, ge=0)  # dense warm-up: only the indexers train, on the KL
    sparse_steps: int = Field(50, ge=0)  # sparse training: top-k attention, LM loss + KL
    indexer_lr: float = Field(5e-3, gt=0)  # the indexers' lr at the start of the warm-up
    indexer_min_lr: float = Field(2e-4, gt=0)  # ... at its end, and through sparse training
    sparse_lr: float = Field(1e-4, gt=0)  # the main model's constant lr in sparse training
    kl_weight: float = Field(1.0, gt=0)  # weight of the indexer KL (its own graph, own optimizer)
    grad_clip: float = Field(1.0, gt=0)  # per optimizer (main model, indexers)


def dsa_attentions(model: nn.Module) -> list[nn.Module]:
    """The model's attention layers that run their own DSA indexer."""
    return [m for m in model.modules() if getattr(m, "indexer", None) is not None]


def attention_probs(
    attn: nn.Module, h: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor], keep: torch.Tensor
) -> torch.Tensor:
    """The (B, H, S, T) fp32 attention probabilities of a `GlmMoeDsaAttention` layer for its
    normed input `h` (B, S, d) over the keys `keep` (B, S, T) allows, from its own weights:
    transformers' MLA computation without the value side."""
    B, S, _ = h.shape
    nope, rope = attn.qk_nope_head_dim, attn.qk_rope_head_dim
    q_resid = attn.q_a_layernorm(attn.q_a_proj(h))  # (B, S, q_lora_rank)
    q = attn.q_b_proj(q_resid).view(B, S, -1, attn.qk_head_dim).transpose(1, 2)  # (B, H, S, D)
    q_pass, q_rot = q.split([nope, rope], dim=-1)
    kv_pass, k_rot = attn.kv_a_proj_with_mqa(h).split([attn.kv_lora_rank, rope], dim=-1)
    k_pass = attn.kv_a_layernorm(kv_pass).view(B, 1, S, attn.kv_lora_rank)
    q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot.view(B, 1, S, rope), *cos_sin)
    k, _ = attn.expand_kv(k_pass, k_rot)  # (B, H, T, D)
    q = torch.cat([q_pass, q_rot], dim=-1)  # (B, H, S, D)
    logits = torch.matmul(q.float(), k.float().transpose(-1, -2)) * attn.scaling  # (B, H, S, T)
    return logits.masked_fill(~keep[:, None], torch.finfo(logits.dtype).min).softmax(-1)


def indexer_kl(target: torch.Tensor, scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean over queries of KL(p || softmax(I)) restricted to the kept keys.

    Args:
        target: (B, S, T) main attention probabilities summed over heads (detached); normalised
            here over the kept keys, `p = target / sum(target)`.
        scores: (B, S, T) the indexer's scores `I` (with grad).
        keep: (B, S, T) bool, the keys each query attends (causal, and selected when sparse).
    Returns:
        The scalar loss `mean_t sum_s p_ts (log p_ts - log q_ts)` over queries with a kept key.
    """
    p = target.float().masked_fill(~keep, 0.0)
    p = p / p.sum(-1, keepdim=True).clamp_min(1e-12)  # (B, S, T)
    logq = scores.float().masked_fill(~keep, torch.finfo(torch.float32).min).log_softmax(-1)
    kl = (torch.xlogy(p, p) - p * logq.masked_fill(~keep, 0.0)).sum(-1)  # (B, S)
    return kl[keep.any(-1)].mean()


class IndexerKL(Closing):
    """Forward hooks that record each DSA layer's indexer KL (with grad to the indexer only).

    Use as a context manager around forwards; `pop()` returns the losses recorded since the last
    call, one per DSA layer and forward, in layer order.
    """

    def __init__(self, model: nn.Module) -> None:
        self.losses: list[torch.Tensor] = []
        self._handles = [
            a.register_forward_hook(self._hook, with_kwargs=True) for a in dsa_attentions(model)
        ]

    def _hook(self, attn: nn.Module, args: tuple, kwargs: dict[str, Any], out: tuple) -> None:
        h = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]  # (B, S, d)
        mask, cos_sin = kwargs["attention_mask"][:, 0], kwargs["position_embeddings"]
        if mask.shape[-1] != h.shape[1]:
            raise ValueError("the DSA indexer loss needs a forward without cached earlier keys")
        with torch.no_grad():
            valid = mask if mask.dtype == torch.bool else mask == 0  # (B, S, T)
            selected = torch.zeros_like(valid).scatter(-1, out[2].long(), True)
            keep = valid & selected  # (B, S, T)
            target = attention_probs(attn, h, cos_sin, keep).sum(1)  # (B, S, T)
            q_resid = attn.q_a_layernorm(attn.q_a_proj(h))  # (B, S, q_lora_rank), detached
        with torch.enable_grad():
            scores = attn.indexer.index_scores(h.detach(), q_resid, cos_sin, mask, None)
            self.losses.append(indexer_kl(target, scores, keep))

    def pop(self) -> list[torch.Tensor]:
        out, self.losses = self.losses, []
        return out

    def close(self) -> None:
        for h in self._handles:
            h.remove()


@contextmanager
def dense_attention(model: nn.Module) -> Iterator[None]:
    """Every indexer keeps every key inside the block: DSA attention equals dense attention."""
    ixs = indexers(model)
    saved = [ix.index_topk for ix in ixs]
    for ix in ixs:
        ix.index_topk = sys.maxsize  # the indexer keeps min(index_topk, T) keys
    try:
        yield
    finally:
        for ix, k in zip(ixs, saved):
            ix.index_topk = k


@dataclass
class DsaResult:
    """Per-step curves of the two phases (mean indexer KL over layers, LM loss)."""

    warmup_kl: list[float] = field(default_factory=list)
    sparse_kl: list[float] = field(default_factory=list)
    sparse_lm_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _indexer_params(model: nn.Module) -> list[nn.Parameter]:
    return [p for ix in indexers(model) for p in ix.parameters()]


def _lm_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))


def run_dsa_phases(
    model: nn.Module,
    batches: Callable[[int], torch.Tensor],
    cfg: DsaCfg,
    optim: OptimCfg | None = None,
    log: Callable[[dict[str, Any]], None] | None = None,
) -> DsaResult:
    """Train a DSA model through the dense warm-up and sparse training (see module doc).

    Args:
        model: a causal LM with DSA indexers (a `glm5-*` preset).
        batches: step -> packed (B, T+1) token block; steps 0..warmup_steps-1 feed the warm-up,
            the next sparse_steps steps sparse training.
        cfg: the phases' lengths, learning rates and KL weight.
        optim: the main model's optimizer in sparse training (its lr replaced by
            `cfg.sparse_lr`); default AdamW.
        log: called with one row per step: step, phase, indexer_kl (mean over layers),
            indexer_kl_l<i> per DSA layer, lr, and lm_loss in sparse training.
    Returns:
        DsaResult with the per-step curves. The model's `requires_grad` flags and train/eval
        mode are restored; its indexers keep their `index_topk`.
    """
    ix_params = _indexer_params(model)
    if not ix_params:
        raise UserError("dsa: the model has no DSA indexer (use a glm5-* model preset)")
    flags = [(p, p.requires_grad) for p in model.parameters()]
    was_training, device = model.training, model_device(model)
    res, t0 = DsaResult(), time.time()
    ix_opt = torch.optim.AdamW(ix_params, lr=cfg.indexer_lr, weight_decay=0.0)
    model.train()
    try:
        model.requires_grad_(False)
        for p in ix_params:
            p.requires_grad_(True)
        with IndexerKL(model) as cap, dense_attention(model):
            for step in range(cfg.warmup_steps):
                frac = step / max(1, cfg.warmup_steps - 1)
                lr = cfg.indexer_lr + frac * (cfg.indexer_min_lr - cfg.indexer_lr)
                x = to_device(batches(step), device)[:, :-1]  # (B, T)
                with torch.no_grad():  # only the hooks' indexer scores build a graph
                    model(input_ids=x, use_cache=False, logits_to_keep=1)
                kl = _indexer_step(cap.pop(), ix_opt, ix_params, lr, cfg)
                res.warmup_kl.append(float(sum(kl) / len(kl)))
                _log(log, step + 1, "dsa_warmup", kl, lr)
        main_opt = _main_optimizer(model, optim, cfg)
        for p in ix_params:
            p.requires_grad_(True)
        main_params = [p for g in main_opt.param_groups for p in g["params"]]
        with IndexerKL(model) as cap:
            for i in range(cfg.sparse_steps):
                step = cfg.warmup_steps + i
                batch = to_device(batches(step), device)
                x, y = batch[:, :-1], batch[:, 1:]  # (B, T), (B, T)
                lm = _lm_loss(model(input_ids=x, use_cache=False).logits, y)
                main_opt.zero_grad(set_to_none=True)
                lm.backward()
                torch.nn.utils.clip_grad_norm_(main_params, cfg.grad_clip)
                main_opt.step()
                kl = _indexer_step(cap.pop(), ix_opt, ix_params, cfg.indexer_min_lr, cfg)
                res.sparse_kl.append(float(sum(kl) / len(kl)))
                res.sparse_lm_loss.append(lm.item())
                _log(log, step + 1, "dsa_sparse", kl, cfg.indexer_min_lr, lm_loss=lm.item())
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)
    res.seconds = time.time() - t0
    return res


def _main_optimizer(model: nn.Module, optim: OptimCfg | None, cfg: DsaCfg):
    """The main model's optimizer: every weight but the indexers', at a constant sparse_lr."""
    model.requires_grad_(True)  # build_optimizer leaves the indexers out (freeze_indexer)
    upd = {"lr": cfg.sparse_lr, "freeze_indexer": True}
    return build_optimizer(model, (optim or OptimCfg()).model_copy(update=upd))


def _indexer_step(
    losses: list[torch.Tensor],
    opt: torch.optim.Optimizer,
    params: list[nn.Parameter],
    lr: float,
    cfg: DsaCfg,
) -> list[float]:
    """One indexer update on the recorded per-layer KLs; returns their values."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    (cfg.kl_weight * torch.stack(losses).mean()).backward()
    torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    opt.step()
    return [v.item() for v in losses]


def _log(log, step: int, phase: str, kl: list[float], lr: float, **extra: float) -> None:
    if log is None:
        return
    row = {"step": step, "phase": phase, "indexer_kl": sum(kl) / len(kl), "indexer_lr": lr}
    row.update({f"indexer_kl_l{i}": v for i, v in enumerate(kl)})
    log({**row, **extra})
