"""Decoders behind LocalEngine: a lean Llama-family decode step and a generic HF fallback.

`FastDecoder` runs prefill and single-token decode steps over a model's own weights (q/k/v
and gate/up fused into single matmuls, SDPA attention, a preallocated KV cache, the vocabulary
projection only where logits are needed); `HFDecoder` does the same through any causal LM's
forward with a `DynamicCache`. `quantize_int8` swaps Linear layers for simulated W8A8 int8
(per-output-channel weights, per-token activations, fp32 accumulation): the numerics of an int8
kernel, not its speed (see local.py's header). `fast_supported` says which models take the lean
path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_FAST_MODEL_TYPES = ("llama", "qwen2", "qwen3")


class _Int8Linear(nn.Module):
    """Simulated dynamic W8A8 Linear: y = (q(x) · q(W)ᵀ) · s_x · s_w + b.

    q(W): symmetric per-output-channel int8; q(x): symmetric per-token int8, computed per call.
    The int8 values are kept in fp32 so the product runs on the fp32 BLAS (exact integer sums
    while in_features · 127² < 2²⁴, i.e. in_features < 1040; close beyond).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()  # (out, in)
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0  # (out,)
        self.register_buffer("w_q", torch.round(w / scale[:, None]).clamp(-127, 127))
        self.register_buffer("w_scale", scale)
        b = linear.bias
        self.register_buffer("bias", None if b is None else b.detach().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s_x = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / 127.0  # (..., 1)
        x_q = torch.round(x / s_x).clamp(-127, 127)  # (..., in)
        y = (x_q @ self.w_q.T) * s_x * self.w_scale  # (..., out)
        return y if self.bias is None else y + self.bias


def quantize_int8(module: nn.Module) -> None:
    """Replace every Linear under `module`, in place, by its simulated W8A8 int8 version."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, _Int8Linear(child))
        else:
            quantize_int8(child)


def _fuse(linears: list[nn.Linear]) -> nn.Linear:
    """One Linear whose output is the concatenation of the given ones' outputs."""
    w = torch.cat([lin.weight.detach() for lin in linears])  # (Σout, in)
    has_bias = linears[0].bias is not None
    fused = nn.Linear(w.shape[1], w.shape[0], bias=has_bias, device=w.device, dtype=w.dtype)
    fused.weight.data.copy_(w)
    if has_bias:
        fused.bias.data.copy_(torch.cat([lin.bias.detach() for lin in linears]))
    return fused


# ---------------------------------------------------------------- decoders


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class _FastLayer(nn.Module):
    """One Llama-family decoder layer over a preallocated cache slice."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        att, mlp = layer.self_attn, layer.mlp
        self.in_norm, self.post_norm = layer.input_layernorm, layer.post_attention_layernorm
        self.qkv = _fuse([att.q_proj, att.k_proj, att.v_proj])
        self.o = att.o_proj
        self.q_norm, self.k_norm = getattr(att, "q_norm", None), getattr(att, "k_norm", None)
        self.gate_up = _fuse([mlp.gate_proj, mlp.up_proj])
        self.down, self.act = mlp.down_proj, mlp.act_fn
        self.hd, self.scaling = att.head_dim, att.scaling
        self.n_q = att.q_proj.out_features // self.hd
        self.n_kv = att.k_proj.out_features // self.hd
        self.split = [self.n_q * self.hd, self.n_kv * self.hd, self.n_kv * self.hd]

    def forward(self, x, cos, sin, k_cache, v_cache, t0: int, attn_mask):
        # x (B, T, D); cos/sin (B, 1, T, hd); k/v_cache (B, Hkv, Tmax, hd); attn_mask (B, 1, T, t0+T)
        B, T, _ = x.shape
        q, k, v = self.qkv(self.in_norm(x)).split(self.split, dim=-1)
        q, k = q.view(B, T, self.n_q, self.hd), k.view(B, T, self.n_kv, self.hd)
        if self.q_norm is not None:  # qwen3
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, hd)
        q = q * cos + _rotate_half(q) * sin
        k_cache[:, :, t0 : t0 + T] = k * cos + _rotate_half(k) * sin
        v_cache[:, :, t0 : t0 + T] = v.view(B, T, self.n_kv, self.hd).transpose(1, 2)
        if T == 1:
            L = attn_mask.shape[-1]  # the whole cache in decode steps: no strided copies
            a = self._decode_attention(q, k_cache[:, :, :L], v_cache[:, :, :L], attn_mask)
        else:
            a = F.scaled_dot_product_attention(
                q,
                k_cache[:, :, : t0 + T],
                v_cache[:, :, : t0 + T],
                attn_mask=attn_mask,
                scale=self.scaling,
                enable_gqa=self.n_q != self.n_kv,
            )  # (B, H, T, hd)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, -1))
        g, u = self.gate_up(self.post_norm(x)).chunk(2, dim=-1)
        return x + self.down(self.act(g) * u)

    def _decode_attention(self, q, k, v, attn_mask):
        """One query per row: the query heads of each KV group as one matmul over the cache.

        CPU SDPA with a mask and GQA runs a per-head flash kernel that costs more than the
        matmuls of the whole layer at batch 32 in bf16; two grouped matmuls do the same sum.
        q (B, H, 1, hd), k/v (B, Hkv, L, hd), attn_mask (B, 1, 1, L) bool. Decode steps pass
        the whole preallocated cache (L = Tmax, masked beyond the current slot): a slice of it
        is a strided view that the batched matmul copies every layer and step.
        """
        B, L = q.shape[0], k.shape[2]
        g = self.n_q // self.n_kv
        qg = q.reshape(B, self.n_kv, g, self.hd)  # heads of one KV group are consecutive
        s = torch.matmul(qg, k.transpose(-1, -2)).float() * self.scaling  # (B, Hkv, g, L)
        s = s.masked_fill(~attn_mask.view(B, 1, 1, L), float("-inf"))
        p = s.softmax(-1).to(v.dtype)
        return torch.matmul(p, v).reshape(B, self.n_q, 1, self.hd)


class FastDecoder(nn.Module):
    """Llama-family decode loop state: KV cache (B, Hkv, Tmax, hd) per layer, valid-key mask,
    next position per row. Computes logits for the last position only."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        base = model.model
        self.embed, self.norm = base.embed_tokens, base.norm
        self.lm_head = model.get_output_embeddings()
        self.layers = nn.ModuleList(_FastLayer(layer) for layer in base.layers)
        n_pos = model.config.max_position_embeddings
        w = self.embed.weight
        with torch.no_grad():  # fp32 table, like HF; cast to the compute dtype when used
            cos, sin = base.rotary_emb(w.float(), torch.arange(n_pos, device=w.device)[None])
        self.cos_tab, self.sin_tab = cos[0], sin[0]  # (n_pos, hd), plain attributes

    def _forward(self, ids, pos, attn_mask, t0: int, rows=slice(None)) -> torch.Tensor:
        x = self.embed(ids)  # (b, T, D)
        cos = self.cos_tab[pos].to(x.dtype)[:, None]  # (b, 1, T, hd)
        sin = self.sin_tab[pos].to(x.dtype)[:, None]
        for layer, kc, vc in zip(self.layers, self.k, self.v):
            x = layer(x, cos, sin, kc[rows], vc[rows], t0, attn_mask)
        return self.lm_head(self.norm(x[:, -1])).float()  # (b, V)

    def prefill(
        self, ids: torch.Tensor, mask: torch.Tensor, max_len: int, buckets: int = 4
    ) -> torch.Tensor:
        """Fill the cache for a left-padded batch; returns the last position's logits (B, V).

        Rows are prefilled in `buckets` groups of consecutive rows, each cut to its own longest
        prompt: with rows sorted by length (LocalEngine sorts) most padding is never computed.
        """
        if max_len > self.cos_tab.shape[0]:
            raise ValueError(
                f"prompt + max_new_tokens = {max_len} exceeds the model's "
                f"max_position_embeddings = {self.cos_tab.shape[0]}"
            )
        (B, P), w = ids.shape, self.embed.weight
        l0 = self.layers[0]
        shape = (B, l0.n_kv, max_len, l0.hd)
        self.k = [torch.zeros(shape, dtype=w.dtype, device=w.device) for _ in self.layers]
        self.v = [torch.zeros(shape, dtype=w.dtype, device=w.device) for _ in self.layers]
        self.valid = torch.zeros(B, max_len, dtype=torch.bool, device=w.device)  # (B, Tmax)
        self.valid[:, :P] = mask.bool()
        lengths = mask.long().sum(-1)  # (B,)
        slots = torch.arange(P, device=w.device)
        logits, size = [], -(-B // buckets)
        for r0 in range(0, B, size):
            rows = slice(r0, min(B, r0 + size))
            t0 = P - int(lengths[rows].max())  # this group's tokens sit in slots [t0, P)
            valid = self.valid[rows, :P]  # (b, P)
            pos = (valid.long().cumsum(-1) - 1).clamp(min=0)[:, t0:]  # (b, T)
            causal = slots[None, :] <= slots[t0:, None]  # (T, P): key slot <= query slot
            eye = slots[None, :] == slots[t0:, None]  # pad queries see themselves: no NaN
            attn = (causal[None] & valid[:, None, :]) | eye[None]  # (b, T, P)
            logits.append(self._forward(ids[rows, t0:], pos, attn[:, None], t0, rows))
        self.pos, self.t = lengths, P  # next position of each row, next cache slot
        return torch.cat(logits)  # (B, V)

    def step(self, tok: torch.Tensor) -> torch.Tensor:
        t = self.t
        self.valid[:, t] = True
        logits = self._forward(tok[:, None], self.pos[:, None], self.valid[:, None, None], t)
        self.pos, self.t = self.pos + 1, t + 1
        return logits

    def keep(self, rows: torch.Tensor) -> None:
        self.k = [c.index_select(0, rows) for c in self.k]
        self.v = [c.index_select(0, rows) for c in self.v]
        self.valid, self.pos = self.valid[rows], self.pos[rows]


class HFDecoder(nn.Module):
    """Any causal LM through its own forward and a DynamicCache (the portable path)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def _run(self, ids, pos):
        out = self.model(
            input_ids=ids,
            attention_mask=self.mask,
            position_ids=pos,
            cache=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1].float()  # (B, V)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, max_len: int) -> torch.Tensor:
        from transformers import DynamicCache

        self.cache, self.mask = DynamicCache(config=self.model.config), mask.long()
        pos = (self.mask.cumsum(-1) - 1).clamp(min=0)  # (B, P)
        self.pos = pos[:, -1] + 1
        return self._run(ids, pos)

    def step(self, tok: torch.Tensor) -> torch.Tensor:
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        logits = self._run(tok[:, None], self.pos[:, None])
        self.pos = self.pos + 1
        return logits

    def keep(self, rows: torch.Tensor) -> None:
        self.cache.batch_select_indices(rows)
        self.mask, self.pos = self.mask[rows], self.pos[rows]


def fast_supported(model: nn.Module) -> bool:
    """Whether `FastDecoder` can run `model`: a Llama-family type, no dynamic RoPE, full
    attention in every layer."""
    cfg = model.config
    rope = (getattr(cfg, "rope_parameters", None) or {}).get("rope_type", "default")
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"]
    return (
        cfg.model_type in _FAST_MODEL_TYPES
        and "dynamic" not in rope
        and all(t == "full_attention" for t in layer_types)
    )
