"""The GLM-5 presets (transformers' glm_moe_dsa): build at CPU size, train a step, round-trip
through a stock `save_pretrained` directory, and the LocalEngine's logprobs (KV cache, left
padding, sparse attention past index_topk) equal the trainer's teacher-forced ones."""

import json

import pytest
import torch
from torch.testing import assert_close
from transformers import AutoModelForCausalLM

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import count_params, init_model, load_model, save_checkpoint
from arcforge.model.dsa import StableTopkIndexer, use_stable_topk
from arcforge.model.presets import build_config
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.train.optim import build_optimizer

V = 96


pytestmark = pytest.mark.usefixtures("one_thread")


def test_glm5_tiny_builds_trains_saves_and_generates(tmp_path):
    cfg = build_config(
        "glm5-tiny", vocab_size=V, max_position_embeddings=128, pad_token_id=0, index_topk=16
    )  # the prompts below run past 16 keys
    model = init_model(cfg, seed=0)
    n = count_params(model)
    assert cfg.model_type == "glm_moe_dsa" and 0.9e6 < n["non_embedding"] < 1.5e6, n
    assert init_model(cfg, seed=0).state_dict().keys() == model.state_dict().keys()

    opt = build_optimizer(model, OptimCfg(name="muon_split", lr=1e-2))
    ids = torch.randint(1, V, (4, 32), generator=torch.Generator().manual_seed(0))  # (B, T)
    before = model.model.layers[1].mlp.experts.down_proj.detach().clone()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and not torch.equal(
        before, model.model.layers[1].mlp.experts.down_proj
    )

    model.eval()
    out = save_checkpoint(model, None, tmp_path / "ckpt")
    assert json.loads((out / "config.json").read_text())["model_type"] == "glm_moe_dsa"
    stock = AutoModelForCausalLM.from_pretrained(str(out), local_files_only=True).eval()
    ours = load_model(out, device=torch.device("cpu"))
    assert isinstance(ours.model.layers[0].self_attn.indexer, StableTopkIndexer)
    for k, v in model.state_dict().items():
        assert torch.equal(stock.state_dict()[k], v), k
    # transformers' own torch.topk orders tied indexer scores its own way (an untrained
    # indexer ties often), so the logits are compared with the stable top-k switched on
    use_stable_topk(stock)
    with torch.no_grad():
        ref = model(input_ids=ids).logits
        assert_close(stock(input_ids=ids).logits, ref, atol=1e-5, rtol=0)
        assert_close(ours(input_ids=ids).logits, ref, atol=1e-5, rtol=0)

    prompts = [[5, 6, 7, 8], list(range(10, 40)), [3, 4]]  # left-padded in one batch
    engine = LocalEngine(ours, pad_token_id=0)
    plain = SamplingParams(max_new_tokens=12, temperature=1.0, seed=0)
    # with stop tokens rows finish early and are dropped from the batch (and its KV cache)
    stops = SamplingParams(
        max_new_tokens=12, temperature=1.0, seed=1, n=2, stop_token_ids=list(range(1, V, 4))
    )
    outs = engine.generate(prompts, plain) + engine.generate(prompts, stops)
    assert {len(c.token_ids) for c in outs[3:]} != {12}  # some row did stop early
    for p, c in zip(prompts + [p for p in prompts for _ in range(2)], outs):
        full = torch.tensor([p + c.token_ids])  # (1, P + N)
        with torch.no_grad():
            logits = ours(input_ids=full).logits[:, len(p) - 1 : -1]
        lp = token_logprobs(logits, full[:, len(p) :])[0]
        assert_close(torch.tensor(c.logprobs), lp, atol=1e-4, rtol=0)
    assert all(len(c.token_ids) == 12 for c in outs[:3])


def test_glm5_small_builds():
    cfg = build_config("glm5-small", vocab_size=V, max_position_embeddings=128)
    model = init_model(cfg, seed=0)
    assert 5e6 < count_params(model)["non_embedding"] < 8e6
    assert len(model.model.layers) == 4 and cfg.mlp_layer_types == ["dense"] + ["sparse"] * 3
