"""The random-weight Llama the engine benchmarks time: 4 layers, hidden 256, vocab 2048.

Shared by `engine_throughput.py` and `engine_vllm.py` so both time the same model; run those
scripts from the repository root (`python benchmarks/engine_throughput.py`), which puts this
folder on the import path.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

PAD = 0


def build_model(tie_word_embeddings: bool = False) -> LlamaForCausalLM:
    """The benchmark model in eval mode, seeded with 0 (vLLM loads it with tied embeddings)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=2048,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=512,
        max_position_embeddings=512,
        pad_token_id=PAD,
        tie_word_embeddings=tie_word_embeddings,
    )
    return LlamaForCausalLM(cfg).eval()
