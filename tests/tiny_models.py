"""Tiny in-process models the tests share, sized for a 2-core CPU (no downloads).

Importable from any test module because pytest puts `tests/` (home of the root conftest.py) on
the import path.
"""

from dataclasses import asdict

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, PretrainedConfig, PreTrainedModel

from arcforge.chat.tokens import END
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import PRESETS, build_config

# a 2-layer Llama with grouped-query attention: the nano preset's layout (hidden 64, 4 heads)
# with 2 KV heads and an MLP of 128, vocabulary 96, 256 positions: the engine tests' model
SMALL_LLAMA = {**asdict(PRESETS["nano"]), "num_key_value_heads": 2, "intermediate_size": 128}
SMALL_LLAMA |= {"vocab_size": 96, "max_position_embeddings": 256}


def small_llama() -> LlamaForCausalLM:
    """A `SMALL_LLAMA` model in eval mode, its weights drawn after `torch.manual_seed(0)`."""
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL_LLAMA)).eval()


def micro_llama_config(vocab_size: int, **overrides) -> LlamaConfig:
    """`SMALL_LLAMA` halved: hidden size 32, 2 heads (2 KV heads), MLP 64; tied embeddings and 64
    positions (`overrides` replace or add fields): the MTP and speculative-decoding model."""
    halved = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
    fields = {**SMALL_LLAMA, **halved, "max_position_embeddings": 64, "tie_word_embeddings": True}
    return LlamaConfig(**{**fields, "vocab_size": vocab_size, **overrides})


def glm5_two_layers(vocab_size: int, **overrides) -> PretrainedConfig:
    """The glm5-tiny preset cut to 2 layers (layer 0 dense, layer 1 MoE with 8 experts, top-2)
    and 64 positions, pad id 0; `overrides` are further preset fields (e.g. index_topk)."""
    return build_config(
        "glm5-tiny",
        vocab_size=vocab_size,
        max_position_embeddings=64,
        pad_token_id=0,
        num_hidden_layers=2,
        **overrides,
    )


def toy_token_nano(vocab_size: int, pad: int, bos: int, eos: int, seed: int = 0) -> PreTrainedModel:
    """A random nano model (weights from `seed`) over a toy vocabulary of `vocab_size` token ids
    with these pad, BOS and EOS ids, and 16 positions: the toy-task RL and distillation model."""
    cfg = build_config("nano", vocab_size, 16, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos)
    return init_model(cfg, seed=seed)


def end_biased_nano(
    tok, max_position_embeddings: int = 1024, end_bias: float = 5.0, end_id: int | None = None
) -> PreTrainedModel:
    """A random nano model (seed 0, untied head) whose <|end|> logit (or `end_id`'s, a real
    checkpoint's stop id) carries `end_bias`, so its replies are a few tokens long (+5) or
    episodes end within a few turns (+3): cheap episodes for rollout tests."""
    cfg = build_config("nano", len(tok), max_position_embeddings, tie_word_embeddings=False)
    model = init_model(cfg, seed=0)
    head = nn.Linear(cfg.hidden_size, len(tok), bias=True)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.convert_tokens_to_ids(END) if end_id is None else end_id] = end_bias
    model.lm_head = head
    return model
