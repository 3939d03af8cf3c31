"""DeepSeek Sparse Attention in the GLM-5 presets (arcforge.model.dsa): with index_topk >= the
sequence it is dense attention; the top-k breaks ties by key index, the same in the engine's
decode steps and the trainer's teacher-forced pass; the indexer stays frozen in RL."""

import pytest
import torch
import torch.nn.functional as F
from tiny_models import glm5_two_layers
from torch.testing import assert_close
from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import (
    GlmMoeDsaIndexer,
    apply_rotary_pos_emb_interleave,
)

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model
from arcforge.model.dsa import StableTopkIndexer, indexers, stable_topk
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.stages.rl import RLStageCfg
from arcforge.train.optim import build_optimizer

V, T = 64, 24


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**overrides):
    return init_model(glm5_two_layers(V, **overrides), seed=0).eval()


def test_stable_topk_breaks_ties_by_index():
    s = torch.tensor([[0.0, 2.0, 0.0, 2.0, 0.0, -1.0]])
    # descending with ties to the lower index: 2.0 at 1, 3; then the 0.0s at 0, 2, 4
    assert stable_topk(s, 4).tolist() == [[1, 3, 0, 2]]


def _attn_inputs(model, x):
    pos = torch.arange(x.shape[1])[None]  # (1, T)
    cos_sin = model.model.rotary_emb(x, pos)
    causal = torch.full((T, T), torch.finfo(x.dtype).min).triu(1)[None, None]  # (1, 1, T, T)
    return cos_sin, causal, pos


def _dense_mla(attn, x, cos_sin):
    """MLA with every earlier key: the reference, from the module's weights."""
    B, S, _ = x.shape
    nope, rope, vd, H = (
        attn.qk_nope_head_dim,
        attn.qk_rope_head_dim,
        attn.v_head_dim,
        attn.num_heads,
    )
    q = attn.q_b_proj(attn.q_a_layernorm(attn.q_a_proj(x))).view(B, S, H, -1).transpose(1, 2)
    q_pass, q_rot = q.split([nope, rope], dim=-1)  # (B, H, S, .)
    kv_pass, k_rot = attn.kv_a_proj_with_mqa(x).split([attn.kv_lora_rank, rope], dim=-1)
    kv = attn.kv_b_proj(attn.kv_a_layernorm(kv_pass)).view(B, S, H, nope + vd).transpose(1, 2)
    k_pass, v = kv.split([nope, vd], dim=-1)  # (B, H, S, .)
    q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot[:, None], *cos_sin)
    q = torch.cat([q_pass, q_rot], dim=-1)
    k = torch.cat([k_pass, k_rot.expand(-1, H, -1, -1)], dim=-1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=attn.scaling)  # (B,H,S,vd)
    return attn.o_proj(o.transpose(1, 2).reshape(B, S, H * vd))


def test_topk_covering_the_sequence_equals_dense_attention():
    torch.manual_seed(0)
    x = torch.randn(2, T, 128)  # (B, T, d)
    for topk, dense in ((T, True), (T // 3, False)):
        model = _model(index_topk=topk)
        attn = model.model.layers[0].self_attn
        cos_sin, causal, pos = _attn_inputs(model, x)
        with torch.no_grad():
            out, _, idx = attn(x, cos_sin, causal, position_ids=pos)
            ref = _dense_mla(attn, x, cos_sin)
        assert idx.shape == (2, T, topk)
        if dense:
            assert_close(out, ref, atol=1e-5, rtol=0)
        else:  # the selection is real: later queries lose keys
            assert (out - ref).abs().max() > 1e-3


def test_scores_and_selection_match_transformers_indexer():
    model = _model(index_topk=8)
    ix = model.model.layers[0].self_attn.indexer
    assert isinstance(ix, StableTopkIndexer)
    torch.manual_seed(1)
    x, q_resid = torch.randn(2, T, 128), torch.randn(2, T, 64)
    cos_sin, causal, pos = _attn_inputs(model, x)
    args = (x, q_resid, cos_sin, causal[:, 0])
    scores = ix.index_scores(*args, cache=None)  # (B, T, T)
    theirs = GlmMoeDsaIndexer.forward(ix, *args, pos).long()
    ours = ix(*args, pos).long()
    # the same top-k scores (transformers' order among equal scores is its own)
    assert_close(scores.gather(-1, ours).sort(-1).values, scores.gather(-1, theirs).sort(-1).values)
    assert torch.equal(ours, stable_topk(scores, 8))
    assert torch.equal(ours, ix(*args, pos).long())  # and the same on a repeated run


def _capture(model):
    """Record the valid (causal) key indices each indexer call keeps, per query position."""
    rows: list[list[int]] = []

    def hook(_m, _inp, out):
        if len(rows) == 0 or out.shape[1] > 1:  # prefill or teacher-forced pass: every query
            n0 = 0
        else:
            n0 = len(rows)
        for s in range(out.shape[1]):
            rows.append(sorted(i for i in out[0, s].tolist() if i <= n0 + s))

    handle = indexers(model)[0].register_forward_hook(hook)
    return rows, handle


def test_engine_and_trainer_select_the_same_keys_on_ties():
    # zero head weights: every key scores 0 for every query, a full tie; the first
    # index_topk keys win in each decode step and in the teacher-forced pass alike
    model = _model(index_topk=4)
    for ix in indexers(model):
        torch.nn.init.zeros_(ix.weights_proj.weight)
    prompt = [5, 9, 3, 7, 11, 2]
    engine = LocalEngine(model, pad_token_id=0)
    rows_e, h = _capture(engine._dec.model)
    (c,) = engine.generate([prompt], SamplingParams(max_new_tokens=12, temperature=1.0, seed=0))
    h.remove()
    ids = torch.tensor([prompt + c.token_ids])  # (1, P + N)
    rows_t, h = _capture(model)
    with torch.no_grad():
        logits = model(input_ids=ids).logits  # (1, P + N, V)
    h.remove()
    n = ids.shape[1] - 1  # the engine never feeds the last sampled token
    assert rows_e[:n] == rows_t[:n]
    assert rows_t[10] == [0, 1, 2, 3]  # ties -> lowest indices
    lp = token_logprobs(logits[:, len(prompt) - 1 : -1], ids[:, len(prompt) :])[0]
    assert_close(lp, torch.tensor(c.logprobs), atol=1e-4, rtol=0)


def test_indexer_frozen_in_rl_steps():
    rl_optim = RLStageCfg.model_fields["optim"].default
    assert rl_optim.freeze_indexer  # on by default in the RL stages
    for freeze in (True, False):
        model = _model(index_topk=8).train()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt = build_optimizer(model, rl_optim.model_copy(update={"freeze_indexer": freeze}))
        ids = torch.randint(1, V, (4, 16), generator=torch.Generator().manual_seed(0))
        adv = torch.tensor([1.0, -1.0, 0.5, -0.5])  # (B,)
        for _ in range(2):  # policy-gradient steps, plus an indexer-only loss (as DSA's
            # warm-up adds) that would move the indexer if it were trainable
            logp = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:])  # (B, T-1)
            loss = -(adv[:, None] * logp).mean()
            ix_params = [p for ix in indexers(model) for p in ix.parameters() if p.requires_grad]
            loss = loss + sum((p - 1).square().sum() for p in ix_params)
            opt.zero_grad()
            loss.backward()
            opt.step()
        moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
        moved_ix = {n for n in moved if ".indexer." in n}
        assert "model.layers.1.self_attn.o_proj.weight" in moved
        assert (not moved_ix) if freeze else moved_ix, moved_ix


def test_frozen_indexer_default_for_every_optimizer():
    model = _model()
    build_optimizer(model, OptimCfg(name="muon"))
    assert not any(p.requires_grad for ix in indexers(model) for p in ix.parameters())
