"""Named model sizes as HF configs (gpt-fast's `ModelArgs.from_name`, in HF form).

A preset is only the architecture; vocabulary size and context length come from the tokenizer
and the stage. The result is a stock transformers config, so every checkpoint we write loads in
transformers (and vLLM) without custom code. Embeddings are tied: at these sizes the embedding
matrix would otherwise dominate the parameter count.

Llama presets (`LlamaConfig`). Non-embedding parameters per layer = 4 d^2 (attention) + 3 d f
(SwiGLU MLP) + 2 d (norms):
    nano  d 64,  2 layers, f 192: 2 * (16384 + 36864 + 128) + 64      ~ 0.11M
    tiny  d 128, 2 layers, f 384: 2 * (65536 + 147456 + 256) + 128    ~ 0.43M
    small d 256, 4 layers, f 768: 4 * (262144 + 589824 + 512) + 256   ~ 3.41M
    base  d 384, 6 layers, f 1152: 6 * (589824 + 1327104 + 768) + 384 ~ 11.5M

GLM-5 presets (`GlmMoeDsaConfig`, transformers' `glm_moe_dsa`): MLA attention (low-rank query
and key/value latents, a shared RoPE key), DeepSeek Sparse Attention (a lightning indexer keeps
the top `index_topk` keys per query), and a sigmoid-routed MoE with one shared expert after
`first_k_dense_replace` dense layers; GLM-5's shape at CPU size, head dims multiples of 32.
Non-embedding parameters (measured):
    glm5-tiny  d 128, 4 layers (1 dense + 3 MoE, 8 experts top-2), index_topk 64   ~ 1.15M
    glm5-small d 256, 4 layers (1 dense + 3 MoE, 16 experts top-2), index_topk 128 ~ 6.54M
The indexer learns only from an explicit indexer loss (DSA's warm-up): until then the keys it
keeps beyond `index_topk` are picked by its initial weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformers import GlmMoeDsaConfig, LlamaConfig, PretrainedConfig


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


@dataclass(frozen=True)
class Glm5Preset:
    """Architecture of one GLM-5 (`glm_moe_dsa`) size."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int  # the dense layers' MLP
    moe_intermediate_size: int  # each expert's MLP
    n_routed_experts: int
    num_experts_per_tok: int
    q_lora_rank: int
    kv_lora_rank: int
    index_topk: int
    first_k_dense_replace: int = 1
    n_shared_experts: int = 1
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 32
    v_head_dim: int = 32
    index_n_heads: int = 4
    index_head_dim: int = 64  # its first qk_rope_head_dim dims carry RoPE


GLM5_PRESETS: dict[str, Glm5Preset] = {
    "glm5-tiny": Glm5Preset(
        128, 4, 4, 384, 64, 8, 2, q_lora_rank=64, kv_lora_rank=32, index_topk=64
    ),
    "glm5-small": Glm5Preset(
        256, 4, 4, 768, 128, 16, 2, q_lora_rank=128, kv_lora_rank=64, index_topk=128, v_head_dim=64
    ),
}


def _glm5_fields(p: Glm5Preset) -> dict[str, Any]:
    fields = {k: getattr(p, k) for k in p.__dataclass_fields__}
    fields["num_key_value_heads"] = p.num_attention_heads
    return fields


def build_config(
    preset: str,
    vocab_size: int,
    max_position_embeddings: int,
    rope_theta: float = 10000.0,
    **overrides: Any,
) -> PretrainedConfig:
    """Build the HF config of a named preset.

    Args:
        preset: one of PRESETS or GLM5_PRESETS.
        vocab_size: the tokenizer's vocabulary size (len(tokenizer)).
        max_position_embeddings: the longest context the model is configured for.
        rope_theta: the RoPE base (stored as `rope_parameters["rope_theta"]`, transformers 5).
        **overrides: any field of the config class, applied last (e.g. pad_token_id=0).

    Returns:
        A LlamaConfig (GlmMoeDsaConfig for a `glm5-*` preset) with tied input/output
        embeddings and fp32 weights.
    """
    if preset in GLM5_PRESETS:
        arch = _glm5_fields(GLM5_PRESETS[preset])
    elif preset in PRESETS:
        p = PRESETS[preset]
        arch = {
            "hidden_size": p.hidden_size,
            "num_hidden_layers": p.num_hidden_layers,
            "num_attention_heads": p.num_attention_heads,
            "num_key_value_heads": p.num_key_value_heads or p.num_attention_heads,
            "intermediate_size": p.intermediate_size,
        }
    else:
        known = ", ".join([*PRESETS, *GLM5_PRESETS])
        raise ValueError(f"unknown model preset {preset!r}; known: {known}")
    fields: dict[str, Any] = {
        **arch,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "rope_parameters": {"rope_type": "default", "rope_theta": float(rope_theta)},
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
    }
    fields.update(overrides)
    return (GlmMoeDsaConfig if preset in GLM5_PRESETS else LlamaConfig)(**fields)
