"""Induction-head priming: an initialisation that lets a tiny model learn to copy from context.

Why: every agent suite needs the model to copy names, paths and numbers from its context into
a tool call. Real models do that with induction heads (Olsson et al., 2022), which form only
after hundreds of millions of tokens; the demo's tiny model sees a few million and never forms
them (0% whole-name copying in `benchmarks/copy_probe.py`, with or without copy drills, a
larger vocabulary or a synthetic warm-up). Like mimetic initialisation (Trockman &
Kolter, 2023), `init_for_copying` sets a few weights at init so the structure is there from step
0, and training keeps, reshapes or discards it.

Measured on the demo size (d 128 x 4 layers, vocab 2048, AdamW with 50 warm-up
steps, batches of 16 x 128 random tokens with one span of 16-59 tokens repeated): next-token
accuracy inside the repeat after 400 steps. tests/model/test_prime.py checks the same contrast
at a smaller size.

    stock init (tied, embedding std 0.02), lr 1e-3          0.00
    planted circuit, tied embeddings, lr 1e-3               0.00  (0.08 at init, 0 by step 50)
    untied, input embedding std 1, no plant, lr 1e-3        0.00
    untied, input embedding std 1, planted, lr 1e-3         0.84
    the same at lr 3e-3                                     0.93

Both parts are needed. A tied 0.02-scale embedding is rewritten by the first AdamW steps (each
moves a weight by ~lr whatever its scale, and the shared softmax gradient pulls every token's
vector the same way), so token identity, which the copy circuit keys on, is lost before the
circuit is used. Untied, the input embedding can start at std 1 (RMSNorm makes its scale
irrelevant to the forward pass) and keeps identities apart; the output head learns to read the
copied token. The checkpoint is still a stock Llama (`attention_bias`, `tie_word_embeddings` are
standard LlamaConfig fields that transformers and vLLM load), so nothing downstream changes.

The circuit (head 0 of `prev_layer` and of `ind_layer`):
  * previous-token head: query and key come only from their biases, chosen so RoPE makes every
    position attend to the one before it; its value/output write a random projection `A` of the
    previous token's (normalised) embedding into a frame `U` of the residual stream.
  * induction head: its query is `M A x_m` (the current token's code), its key `M U^T h_n` (the
    code of the token before n), both in the lowest RoPE frequencies, where rotation over a few
    hundred positions is small, so the score peaks where the token before n equals the current
    token; its value/output copy token n's embedding (through a rank-hd projection) into the
    residual stream for the output head to read.
"""

from __future__ import annotations

import math

import torch
from transformers import PreTrainedModel


def _prev_token_qk(freqs: torch.Tensor, hd: int, gap: float, nfreq: int = 6):
    """Query/key biases whose RoPE score peaks at relative position 1 by `gap` nats."""
    w = torch.zeros_like(freqs)
    w[:nfreq] = 1.0
    d = torch.arange(0, 4096, dtype=torch.float64)
    f = (w[:, None] * torch.cos(freqs[:, None] * (d[None] - 1))).sum(0)
    top, other = f[1].item(), torch.cat([f[:1], f[2:]]).max().item()
    amp = math.sqrt(gap * math.sqrt(hd) / (top - other)) * w.sqrt()
    half = hd // 2
    q, k = torch.zeros(hd, dtype=torch.float64), torch.zeros(hd, dtype=torch.float64)
    q[:half] = amp  # HF rotate_half layout: pair (i, i + hd/2) is one complex number
    k[:half], k[half:] = amp * torch.cos(freqs), amp * torch.sin(freqs)
    return q.float(), k.float()


def init_for_copying(model: PreTrainedModel, seed: int = 0, embedding_std: float = 1.0) -> None:
    """Prepare a fresh model to learn copying: wide input embeddings plus the planted circuit.

    The model must be built with `attention_bias=True` and `tie_word_embeddings=False`
    (`copy_config_fields()`); raises ValueError otherwise.
    """
    if getattr(model.config, "tie_word_embeddings", True):
        raise ValueError("induction priming needs untied embeddings (tie_word_embeddings: false)")
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb.copy_(torch.randn(emb.shape, generator=g) * embedding_std)
    prime_induction(model, seed=seed)


def copy_config_fields() -> dict:
    """LlamaConfig fields `init_for_copying` needs."""
    return {"attention_bias": True, "tie_word_embeddings": False}


def prime_induction(
    model: PreTrainedModel,
    prev_layer: int = 0,
    ind_layer: int = 1,
    seed: int = 0,
    content_pairs: int = 6,
    match_gap: float = 10.0,
    copy_gain: float = 3.0,
) -> None:
    """Plant the circuit in head 0 of `prev_layer` and `ind_layer` (in place).

    Needs a Llama-style model built with `attention_bias=True` and `ind_layer > prev_layer`.
    Raises ValueError otherwise. The output scales assume the input embedding's current norm.
    """
    c = model.config
    if not getattr(c, "attention_bias", False):
        raise ValueError("induction priming needs `attention_bias: true` in the model config")
    if not ind_layer > prev_layer >= 0 or ind_layer >= c.num_hidden_layers:
        raise ValueError(f"need 0 <= prev_layer < ind_layer < {c.num_hidden_layers}")
    freqs = model.model.rotary_emb.inv_freq.double()  # the model's own RoPE frequencies
    hd, d = 2 * len(freqs), c.hidden_size
    g = torch.Generator().manual_seed(seed)
    layers = model.model.layers
    emb = model.get_input_embeddings().weight.detach()
    e_rms = emb.pow(2).mean().sqrt().item() * math.sqrt(d)  # typical embedding norm

    # A: the code of a normalised token (norm ~ sqrt(hd))
    A = torch.randn(hd, d, generator=g) / math.sqrt(d)
    U, _ = torch.linalg.qr(torch.randn(d, hd, generator=g))  # residual frame for the code
    # Previous-token head.
    att0 = layers[prev_layer].self_attn
    q, k = _prev_token_qk(freqs, hd, gap=12.0)
    code_gain = e_rms / math.sqrt(hd)  # the code's norm matches the token embedding's
    with torch.no_grad():
        att0.q_proj.weight[:hd] = 0
        att0.q_proj.bias[:hd] = q
        att0.k_proj.weight[:hd] = 0
        att0.k_proj.bias[:hd] = k
        att0.v_proj.weight[:hd] = A
        att0.o_proj.weight[:, :hd] = code_gain * U

    # Induction head: content in the `content_pairs` lowest-frequency rotary pairs.
    half = hd // 2
    dims = [i for p in range(half - content_pairs, half) for i in (p, p + half)]
    r = len(dims)
    M = torch.randn(r, hd, generator=g) / math.sqrt(hd)  # code -> content (norm ~ sqrt(r))
    # After the block's RMSNorm the residual (token + code of equal norm) is scaled to sqrt(d):
    # each part ~ sqrt(d / 2). q = M A x_hat, k = M U^T h_hat; both ~ sqrt(r) * s.
    s_part = math.sqrt(d / 2) / math.sqrt(d)  # the token part's share of a normalised vector
    s = math.sqrt(match_gap * math.sqrt(hd) / r) / s_part
    att1 = layers[ind_layer].self_attn
    Wq = torch.zeros(hd, d)
    Wk = torch.zeros(hd, d)
    Wq[dims] = s * (M @ A)
    Wk[dims] = s * (M @ U.T) * math.sqrt(d / hd)  # U^T h_hat ~ A x_hat * sqrt(hd/d)
    D = torch.randn(hd, d, generator=g) / math.sqrt(d)
    with torch.no_grad():
        att1.q_proj.weight[:hd] = Wq
        att1.q_proj.bias[:hd] = 0
        att1.k_proj.weight[:hd] = Wk
        att1.k_proj.bias[:hd] = 0
        att1.v_proj.weight[:hd] = D
        # D^T D x_hat is x_hat's projection onto hd of d dims (norm ~ sqrt(hd)); scale it to
        # copy_gain token-embedding norms.
        att1.o_proj.weight[:, :hd] = D.T * (copy_gain * e_rms / math.sqrt(hd)) * math.sqrt(d / hd)
