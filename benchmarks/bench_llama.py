"""The random-weight Llama the engine benchmarks time: 4 layers, hidden 256, vocab 2048.

Shared by `engine_throughput.py` and `engine_vllm.py` so both time the same model; run those
scripts from the repository root (`python benchmarks/engine_throughput.py`), which puts this
folder on the import path.
"""

from __future__ import annotations

import torch
from transformers import LlamaForCausalLM

from arcforge.model.presets import build_config

PAD = 0


def build_model(tie_word_embeddings: bool = False) -> LlamaForCausalLM:
    """The benchmark model in eval mode, seeded with 0 (vLLM loads it with tied embeddings)."""
    torch.manual_seed(0)
    # the `small` preset (hidden 256, 4 layers, 4 heads) with a narrower MLP
    cfg = build_config("small", 2048, 512, intermediate_size=512, pad_token_id=PAD)
    cfg.tie_word_embeddings = tie_word_embeddings
    return LlamaForCausalLM(cfg).eval()
