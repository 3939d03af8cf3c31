"""Named model sizes as HF Llama-style configs (gpt-fast's `ModelArgs.from_name`, in HF form).

A preset is only the architecture; vocabulary size and context length come from the tokenizer
and the stage. The result is a plain `LlamaConfig`, so every checkpoint we write is a stock
Llama checkpoint that transformers and vLLM load without custom code. Embeddings are tied: at
these sizes the embedding matrix would otherwise dominate the parameter count.

Non-embedding parameters per layer = 4 d^2 (attention) + 3 d f (SwiGLU MLP) + 2 d (norms):
    nano  d 64,  2 layers, f 192: 2 * (16384 + 36864 + 128) + 64      ~ 0.11M
    tiny  d 128, 2 layers, f 384: 2 * (65536 + 147456 + 256) + 128    ~ 0.43M
    small d 256, 4 layers, f 768: 4 * (262144 + 589824 + 512) + 256   ~ 3.41M
    base  d 384, 6 layers, f 1152: 6 * (589824 + 1327104 + 768) + 384 ~ 11.5M
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformers import LlamaConfig


@dataclass(frozen=True)
class Preset:
    """Architecture of one named size."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    num_key_value_heads: int | None = None


PRESETS: dict[str, Preset] = {
    "nano": Preset(64, 2, 4, 192),
    "tiny": Preset(128, 2, 4, 384),
    "small": Preset(256, 4, 4, 768),
    "base": Preset(384, 6, 6, 1152),
}


def build_config(
    preset: str,
    vocab_size: int,
    max_position_embeddings: int,
    rope_theta: float = 10000.0,
    **overrides: Any,
) -> LlamaConfig:
    """Build a LlamaConfig for a named preset.

    Args:
        preset: one of PRESETS.
        vocab_size: the tokenizer's vocabulary size (len(tokenizer)).
        max_position_embeddings: the longest context the model is configured for.
        rope_theta: the RoPE base (stored as `rope_parameters["rope_theta"]`, transformers 5).
        **overrides: any LlamaConfig field, applied last (e.g. hidden_size=96, pad_token_id=0).

    Returns:
        A LlamaConfig with tied input/output embeddings and fp32 weights.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; known: {', '.join(PRESETS)}")
    p = PRESETS[preset]
    fields: dict[str, Any] = {
        "hidden_size": p.hidden_size,
        "num_hidden_layers": p.num_hidden_layers,
        "num_attention_heads": p.num_attention_heads,
        "num_key_value_heads": p.num_key_value_heads or p.num_attention_heads,
        "intermediate_size": p.intermediate_size,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "rope_parameters": {"rope_type": "default", "rope_theta": float(rope_theta)},
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
    }
    fields.update(overrides)
    return LlamaConfig(**fields)
