"""DeepSeek Sparse Attention (DSA) in transformers' `glm_moe_dsa`: deterministic top-k and a
frozen lightning indexer.

The indexer scores every earlier key per query and the attention keeps the top `index_topk`.
transformers picks them with `torch.topk`, whose order among equal scores is unspecified, and
equal scores are common: the score is a weighted sum of ReLUs, so every key whose ReLUs are all
zero scores exactly 0 for that query. Then a decode step (one query against the cache) and the
trainer's teacher-forced pass (all queries at once) may keep different keys.
`StableTopkIndexer` is transformers' `GlmMoeDsaIndexer.forward` with one change: the selection is
a stable descending sort, so among equal scores the earliest key wins, the same in every run
and for every batch shape. `use_stable_topk(model)` switches a model's indexers to it in place
(the class changes, the weights and `save_pretrained` output do not).

`freeze_indexer(model)` turns the indexer's gradients off: its top-k is not differentiable, so
only an explicit indexer loss (DSA's warm-up) could move it, and RL keeps it fixed so that
rollout and training select the same keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import (
    GlmMoeDsaIndexer,
    apply_rotary_pos_emb_interleave,
)


def stable_topk(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the `k` largest entries along the last dim; ties go to the lower index."""
    return torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]


class StableTopkIndexer(GlmMoeDsaIndexer):
    """`GlmMoeDsaIndexer` whose top-k breaks ties by key index (see module doc)."""

    @torch.no_grad()
    def forward(  # type: ignore[override]
        self,
        hidden_states: torch.Tensor,
        q_resid: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        cache=None,
        **_: object,
    ) -> torch.Tensor:
        """The (B, S, k) int32 indices of the keys each query keeps (see `index_scores`)."""
        scores = self.index_scores(
            hidden_states, q_resid, position_embeddings, attention_mask, cache
        )
        return stable_topk(scores, min(self.index_topk, scores.shape[-1])).to(torch.int32)

    def index_scores(self, hidden_states, q_resid, position_embeddings, attention_mask, cache):
        """(B, S, T) float32 scores of every key for every query, -inf where masked: transformers'
        computation, which scores key t for query s as sum_h w_h(s) relu(q_h(s) . k(t))."""
        B, S, _ = hidden_states.shape
        cos, sin = position_embeddings
        rope, rest = self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim
        q = self.wq_b(q_resid).view(B, S, self.n_heads, self.head_dim)  # (B, S, H, D)
        q_rot, q_pass = torch.split(q, [rope, rest], dim=-1)
        k = self.k_norm(self.wk(hidden_states)).unsqueeze(2)  # (B, S, 1, D)
        k_rot, k_pass = torch.split(k, [rope, rest], dim=-1)
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
        q = torch.cat([q_rot, q_pass], dim=-1)  # (B, S, H, D)
        k = torch.cat([k_rot, k_pass], dim=-1).squeeze(2)  # (B, S, D)
        if cache is not None:
            k = cache.update_indexer(k, self.layer_idx)  # (B, T, D)
        scores = torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1))  # (B, S, H, T)
        scores = F.relu(scores * self.softmax_scale)
        w = self.weights_proj(hidden_states.to(_input_dtype(self.weights_proj, hidden_states)))
        w = w.float()
        w = w * self.n_heads**-0.5  # (B, S, H)
        index_scores = torch.matmul(w.unsqueeze(-2), scores).squeeze(-2)  # (B, S, T)
        if attention_mask.dtype == torch.bool:
            return index_scores.masked_fill(~attention_mask, float("-inf"))
        return index_scores + attention_mask


def _input_dtype(proj: nn.Module, hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype `proj` takes: its float weight's (transformers keeps `weights_proj` in fp32),
    else the hidden states' own (a quantized replacement, e.g. the LocalEngine's int8 Linear,
    has no float `weight`)."""
    weight = getattr(proj, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.is_floating_point():
        return weight.dtype
    return hidden_states.dtype


def indexers(model: nn.Module) -> list[GlmMoeDsaIndexer]:
    """The model's DSA indexers (none for a model without DSA)."""
    return [m for m in model.modules() if isinstance(m, GlmMoeDsaIndexer)]


def use_stable_topk(model: nn.Module) -> nn.Module:
    """Switch every DSA indexer of `model` to `StableTopkIndexer` in place; returns `model`."""
    for m in indexers(model):
        m.__class__ = StableTopkIndexer
    return model


def freeze_indexer(model: nn.Module) -> None:
    """Turn off the gradients of every DSA indexer's weights (a no-op without DSA)."""
    for m in indexers(model):
        m.requires_grad_(False)
