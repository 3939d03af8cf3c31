"""Inference engines: token ids in, sampled token ids and their logprobs out (DESIGN §4).

`Engine` is the protocol the agent loop and the RL loops speak. Two implementations:

- `LocalEngine`: in-process PyTorch. Batched sampling over a left-padded batch with a
  preallocated KV cache. For Llama-family models (llama, qwen2, qwen3) it runs its own lean
  decode step over the model's weights (q/k/v and gate/up fused, SDPA attention, no mask
  building or logits processors per step); any other causal LM runs through the model's own
  forward with a `DynamicCache`. The engine owns a private copy of the weights, so training the
  trainer's model changes nothing until `load_weights`. `precision` makes the copy bf16 or int8
  so that the train/inference mismatch IcePop guards against is real.
- `ServerEngine`: any OpenAI-compatible `/v1/completions` server that takes prompt token ids and
  returns completion token ids and logprobs (vLLM, SGLang, `arcforge serve`).

Logprob convention (both engines): the logprob of each sampled token is log_softmax of the raw
model logits at temperature 1, before temperature / top-k / top-p. That is the policy logprob
the trainer recomputes, and it is what vLLM returns by default (raw logprobs). At T=1 without
top-k/top-p it is also the sampling distribution's logprob.

Deliberate simplifications: int8 is *simulated* W8A8 dynamic quantization (per-output-channel
int8 weights, per-token int8 activations, integer products accumulated in fp32): the numerics
of an int8 kernel, not its speed. `torch.ao.quantization.quantize_dynamic` still exists in
torch 2.13 but its quantized dtypes are deprecated, and torchao is not a dependency.
Generation stops only at `stop_token_ids` (pass the EOS id there; vLLM also stops at EOS).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import httpx
import torch
import torch.nn.functional as F
from torch import nn

FinishReason = Literal["stop", "length"]
PRECISIONS = ("fp32", "bf16", "int8")
_FAST_MODEL_TYPES = ("llama", "qwen2", "qwen3")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 is greedy; top_k 0 and top_p 1 are off.

    With a `seed`, row r of a call (r = prompt_index * n + sample_index) samples from its own
    generator seeded `seed + r`, so its tokens do not depend on the rest of the batch.
    """

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    n: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.n < 1:
            raise ValueError(f"top_k must be >= 0 and n >= 1, got {self.top_k}, {self.n}")


@dataclass
class Completion:
    """One sampled continuation. A stop token, when hit, is the last entry of token_ids."""

    token_ids: list[int]
    logprobs: list[float]  # raw-logit logprob of each token in token_ids (see module docstring)
    finish_reason: FinishReason


@runtime_checkable
class Engine(Protocol):
    """Returns completions ordered prompt by prompt, the n samples of a prompt adjacent."""

    @property
    def version(self) -> int: ...

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]: ...

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None: ...


# ---------------------------------------------------------------- precision


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


def _quantize_int8(module: nn.Module) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, _Int8Linear(child))
        else:
            _quantize_int8(child)


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


class _FastDecoder(nn.Module):
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
        logits = self._forward(
            tok[:, None], self.pos[:, None], self.valid[:, None, None, : t + 1], t
        )
        self.pos, self.t = self.pos + 1, t + 1
        return logits

    def keep(self, rows: torch.Tensor) -> None:
        self.k = [c.index_select(0, rows) for c in self.k]
        self.v = [c.index_select(0, rows) for c in self.v]
        self.valid, self.pos = self.valid[rows], self.pos[rows]


class _HFDecoder(nn.Module):
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


def _fast_supported(model: nn.Module) -> bool:
    cfg = model.config
    rope = (getattr(cfg, "rope_parameters", None) or {}).get("rope_type", "default")
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"]
    return (
        cfg.model_type in _FAST_MODEL_TYPES
        and "dynamic" not in rope
        and all(t == "full_attention" for t in layer_types)
    )


# ---------------------------------------------------------------- sampling


def _sample(logits: torch.Tensor, p: SamplingParams, gens: list[torch.Generator] | None):
    """logits (B, V) fp32 raw -> tokens (B,), logprobs (B,) under log_softmax(logits)."""
    logp = torch.log_softmax(logits, dim=-1)  # (B, V)
    if p.temperature == 0:
        tok = logits.argmax(dim=-1)
    else:
        z = logits / p.temperature  # (B, V)
        if 0 < p.top_k < z.shape[-1]:
            kth = torch.topk(z, p.top_k, dim=-1).values[:, -1:]  # (B, 1)
            z = z.masked_fill(z < kth, -math.inf)
        if p.top_p < 1.0:
            zs, idx = z.sort(dim=-1, descending=True)  # (B, V)
            ps = zs.softmax(dim=-1)
            drop_sorted = ps.cumsum(dim=-1) - ps > p.top_p  # mass before this token > top_p
            z = z.masked_fill(
                torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted), -math.inf
            )
        cdf = z.softmax(dim=-1).cumsum(dim=-1)  # (B, V)
        if gens is None:
            u = torch.rand(cdf.shape[0], 1, device=cdf.device)  # (B, 1)
        else:
            u = torch.cat([torch.rand(1, 1, generator=g, device=cdf.device) for g in gens])
        # Inverse-CDF sampling: one uniform per row (B×V exponentials would cost more than
        # the decode step's matmuls on a CPU). 1-u is in (0, 1], so zero-probability tokens
        # (flat spots of the cdf) are never picked.
        x = (1.0 - u) * cdf[:, -1:]  # (B, 1)
        tok = torch.searchsorted(cdf, x).squeeze(1).clamp(max=cdf.shape[-1] - 1)  # (B,)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


# ---------------------------------------------------------------- engines


class LocalEngine:
    """In-process batched sampler over a private copy of `model` (see module docstring).

    Args:
        model: a transformers causal LM; it is deep-copied, the caller's model is not touched.
        pad_token_id: id used for left padding (never attended to).
        precision: "fp32", "bf16" (weights, activations and KV cache in bf16) or "int8".
        max_batch: rows per forward; larger calls are processed in chunks (shortest prompts first).
        fast: use the lean Llama-family decode path when the architecture allows it.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        pad_token_id: int,
        precision: str = "fp32",
        max_batch: int = 64,
        fast: bool = True,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.pad_token_id, self.precision, self.max_batch = pad_token_id, precision, max_batch
        self._master = copy.deepcopy(model).eval().requires_grad_(False)
        self._fast = fast and _fast_supported(self._master)
        self._version = 0
        self._build()

    @property
    def version(self) -> int:
        return self._version

    def _build(self) -> None:
        m = copy.deepcopy(self._master)
        dec: nn.Module = _FastDecoder(m) if self._fast else _HFDecoder(m)
        if self.precision == "bf16":
            dec = dec.to(torch.bfloat16)
        elif self.precision == "int8":
            _quantize_int8(dec)
        self._dec = dec.eval()
        self._device = next(self._master.parameters()).device

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        """Replace the engine's weights (strict key match) and set the policy version."""
        self._master.load_state_dict(state_dict)
        self._build()
        self._version = version

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        rows = [i for i in range(len(prompts)) for _ in range(params.n)]  # row r -> prompt
        order = sorted(range(len(rows)), key=lambda r: len(prompts[rows[r]]))
        out: list[Completion | None] = [None] * len(rows)
        with torch.inference_mode():
            for s in range(0, len(order), self.max_batch):
                chunk = order[s : s + self.max_batch]
                done = self._generate_batch([prompts[rows[r]] for r in chunk], chunk, params)
                for r, c in zip(chunk, done):
                    out[r] = c
        return out  # type: ignore[return-value]

    def _generate_batch(self, prompts, row_ids, p: SamplingParams) -> list[Completion]:
        B, P, N, dev = len(prompts), max(map(len, prompts)), p.max_new_tokens, self._device
        ids = torch.full((B, P), self.pad_token_id, dtype=torch.long)  # (B, P) left-padded
        mask = torch.zeros(B, P, dtype=torch.long)
        for b, prompt in enumerate(prompts):
            ids[b, P - len(prompt) :], mask[b, P - len(prompt) :] = torch.tensor(prompt), 1
        logits = self._dec.prefill(ids.to(dev), mask.to(dev), P + N)  # (B, V)
        gens = None
        if p.seed is not None:
            gens = [torch.Generator(device=dev).manual_seed(p.seed + r) for r in row_ids]
        stop = torch.tensor(p.stop_token_ids, device=dev) if p.stop_token_ids else None
        toks = torch.full((B, N), self.pad_token_id, dtype=torch.long, device=dev)
        lps = torch.zeros(B, N, device=dev)  # (B, N)
        length = torch.full((B,), N, dtype=torch.long)  # (B,)
        stopped = torch.zeros(B, dtype=torch.bool)
        alive = torch.arange(B, device=dev)  # decoder row -> batch row
        done = torch.zeros(B, dtype=torch.bool, device=dev)  # per decoder row
        for t in range(N):
            tok, lp = _sample(logits, p, gens)  # (b,), (b,)
            toks[alive, t], lps[alive, t] = tok, lp
            if stop is not None:
                hit = torch.isin(tok, stop) & ~done
                if hit.any():
                    length[alive[hit].cpu()], stopped[alive[hit].cpu()] = t + 1, True
                    done |= hit
                    if done.all():
                        break
                    if int(done.sum()) > len(done) // 8:  # drop finished rows from the batch
                        keep = (~done).nonzero().squeeze(1)
                        self._dec.keep(keep)
                        alive, tok, done = alive[keep], tok[keep], done[keep]
                        gens = None if gens is None else [gens[k] for k in keep.tolist()]
            if t + 1 < N:
                logits = self._dec.step(tok)
        toks_l, lps_l = toks.tolist(), lps.tolist()
        return [
            Completion(
                toks_l[b][: length[b]], lps_l[b][: length[b]], "stop" if stopped[b] else "length"
            )
            for b in range(B)
        ]


class ServerEngine:
    """Client for an OpenAI-compatible `POST {base_url}/v1/completions` (vLLM shape).

    Request fields: model, prompt (list of token-id lists), max_tokens, temperature, top_p,
    top_k (-1 = off), n, seed, stop_token_ids, logprobs=0, return_tokens_as_token_ids=true,
    skip_special_tokens=false. Response: choices[i] with index (= prompt * n + sample),
    finish_reason, logprobs.token_logprobs and logprobs.tokens ("token_id:<id>"); a
    choices[i].token_ids list, when present, is used for the ids instead.

    `load_weights` needs a server with `POST /update_weights {"path", "version"}` (arcforge
    serve has it) and a `weight_sync_dir` both processes can read.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        weight_sync_dir: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url, self.model, self.weight_sync_dir = (
            base_url.rstrip("/"),
            model,
            weight_sync_dir,
        )
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self._client.post(route, json=body)
        if r.status_code == 404 and route == "/update_weights":
            raise NotImplementedError(f"{self.base_url} has no /update_weights route")
        if r.status_code != 200:
            raise RuntimeError(f"{self.base_url}{route} answered {r.status_code}: {r.text[:500]}")
        return r.json()

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if not prompts:
            return []
        body = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1,
            "n": params.n,
            "seed": params.seed,
            "stop_token_ids": list(params.stop_token_ids),
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        choices = sorted(self._post("/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompts) * params.n:
            raise RuntimeError(
                f"{self.base_url} returned {len(choices)} choices, "
                f"expected {len(prompts) * params.n}"
            )
        return [_parse_choice(c) for c in choices]

    def load_weights(self, state_dict: dict[str, torch.Tensor], version: int) -> None:
        if self.weight_sync_dir is None:
            raise NotImplementedError(
                "ServerEngine.load_weights needs weight_sync_dir and a server with "
                "POST /update_weights (arcforge serve); for vLLM/SGLang use their own weight "
                "update mechanism or restart the server on a new checkpoint"
            )
        from pathlib import Path

        from safetensors.torch import save_file

        path = Path(self.weight_sync_dir) / f"weights_v{version}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in state_dict.items()}, str(path))
        self._post("/update_weights", {"path": str(path), "version": version})
        self._version = version


def _parse_choice(c: dict[str, Any]) -> Completion:
    lp = c.get("logprobs") or {}
    ids = c.get("token_ids")
    if ids is None:
        tokens = lp.get("tokens") or []
        if any(not str(t).startswith("token_id:") for t in tokens):
            raise RuntimeError(
                "server did not return token ids: ask for "
                "return_tokens_as_token_ids (vLLM >= 0.6) or return token_ids"
            )
        ids = [int(str(t).split(":", 1)[1]) for t in tokens]
    logprobs = [float(x) for x in lp.get("token_logprobs") or []]
    if len(logprobs) != len(ids):
        raise RuntimeError(f"server returned {len(ids)} tokens but {len(logprobs)} logprobs")
    return Completion(
        list(ids), logprobs, "length" if c.get("finish_reason") == "length" else "stop"
    )
