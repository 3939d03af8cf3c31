"""DSA training (arcforge.train.dsa): the indexer KL, the captured attention distribution, the
dense warm-up (only the indexer moves, its KL falls) and sparse training (the LM loss and the
indexer KL reach disjoint weights)."""

import math

import pytest
import torch
from tiny_models import glm5_two_layers
from torch.testing import assert_close

from arcforge.errors import UserError
from arcforge.model.checkpoint import init_model
from arcforge.model.dsa import indexers
from arcforge.model.presets import build_config
from arcforge.train.dsa import (
    DsaCfg,
    IndexerKL,
    attention_probs,
    dense_attention,
    dsa_attentions,
    indexer_kl,
    run_dsa_phases,
)

V, T = 64, 24


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(index_topk=8, sharp=True):
    model = init_model(glm5_two_layers(V, index_topk=index_topk), seed=0)
    if sharp:  # an initial model attends almost uniformly: sharpen it so the KL has a target
        with torch.no_grad():
            for attn in dsa_attentions(model):
                attn.q_b_proj.weight.mul_(8)
                attn.kv_b_proj.weight.mul_(8)
    return model


def _batches(n_rows=64):
    data = torch.randint(1, V, (n_rows, T + 1), generator=torch.Generator().manual_seed(0))
    return lambda step: data[(4 * step) % n_rows :][:4]  # (4, T+1)


def test_indexer_kl_by_hand():
    target = torch.tensor([[[3.0, 1.0, 5.0]]])  # (1, 1, 3); the third key is not kept
    scores = torch.tensor([[[0.0, 0.0, 100.0]]])
    keep = torch.tensor([[[True, True, False]]])
    # p = (0.75, 0.25), q = (0.5, 0.5): KL = 0.75 ln 1.5 + 0.25 ln 0.5 = 0.130812
    want = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert_close(indexer_kl(target, scores, keep), torch.tensor(want))
    # scores ln 3, 0 give q = (0.75, 0.25) = p: KL 0
    matched = torch.tensor([[[math.log(3), 0.0, -7.0]]])
    assert_close(indexer_kl(target, matched, keep), torch.tensor(0.0), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dense", [True, False])
def test_captured_attention_equals_eager_attention_weights(dense):
    model = _model().eval()
    model.set_attn_implementation("eager")  # eager returns its attention weights
    seen = []

    def hook(attn, _args, kw, out):
        mask = kw["attention_mask"][:, 0]
        valid = mask if mask.dtype == torch.bool else mask == 0
        keep = valid & torch.zeros_like(valid).scatter(-1, out[2].long(), True)
        probs = attention_probs(attn, kw["hidden_states"], kw["position_embeddings"], keep)
        seen.append((probs, out[1]))

    handles = [a.register_forward_hook(hook, with_kwargs=True) for a in dsa_attentions(model)]
    ids = torch.randint(1, V, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        if dense:
            with dense_attention(model):
                model(input_ids=ids, use_cache=False)
        else:
            model(input_ids=ids, use_cache=False)
    for h in handles:
        h.remove()
    assert len(seen) == 2
    for probs, eager in seen:  # (B, H, T, T)
        assert_close(probs, eager.float(), atol=1e-5, rtol=0)
        if not dense:  # later queries attend only their top-8 keys
            assert int((probs[:, :, -1] > 0).sum(-1).max()) == 8


def test_dense_attention_context_equals_topk_covering_the_sequence():
    sparse, covering = _model(index_topk=4), _model(index_topk=T)
    ids = torch.randint(1, V, (2, T), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        with dense_attention(sparse):
            dense_logits = sparse(input_ids=ids).logits
        assert_close(dense_logits, covering(input_ids=ids).logits, atol=1e-5, rtol=0)
        assert (sparse(input_ids=ids).logits - dense_logits).abs().max() > 1e-3
    assert all(ix.index_topk == 4 for ix in indexers(sparse))  # restored


def test_warmup_trains_only_the_indexer_and_its_kl_falls():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = []
    res = run_dsa_phases(
        model, _batches(), DsaCfg(warmup_steps=30, sparse_steps=0, indexer_lr=1e-2), log=rows.append
    )
    first, last = sum(res.warmup_kl[:5]) / 5, sum(res.warmup_kl[-5:]) / 5
    assert last < 0.75 * first, res.warmup_kl
    assert [r["step"] for r in rows] == list(range(1, 31))
    assert {"indexer_kl", "indexer_kl_l0", "indexer_kl_l1"} <= rows[0].keys()
    after = model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(".indexer." in k for k in moved), moved
    assert {k for k in before if ".indexer." in k and k.endswith("weight")} <= moved


def test_sparse_losses_reach_disjoint_weights():
    model = _model().train()
    ix_params = [p for ix in indexers(model) for p in ix.parameters()]
    ix_ids = {id(p) for p in ix_params}
    main = [p for p in model.parameters() if id(p) not in ix_ids]
    batch = _batches()(0)
    with IndexerKL(model) as cap:
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits  # (B, T, V)
        kls = cap.pop()
    assert len(kls) == 2  # one per DSA layer
    lm = torch.nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
    kl = torch.stack(kls).mean()
    lm_to_ix = torch.autograd.grad(lm, ix_params, retain_graph=True, allow_unused=True)
    kl_to_main = torch.autograd.grad(kl, main, retain_graph=True, allow_unused=True)
    assert all(g is None for g in lm_to_ix)
    assert all(g is None for g in kl_to_main)
    kl_to_ix = torch.autograd.grad(kl, ix_params, allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in kl_to_ix)
    lm_to_main = torch.autograd.grad(lm, main, allow_unused=True)
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in lm_to_main) > len(main) // 2


def test_sparse_phase_trains_both_and_restores_the_model():
    model = _model().eval()
    for ix in indexers(model):
        ix.requires_grad_(False)  # as the LM stages leave it (freeze_indexer)
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    res = run_dsa_phases(model, _batches(), DsaCfg(warmup_steps=1, sparse_steps=2))
    assert len(res.warmup_kl) == 1 and len(res.sparse_kl) == len(res.sparse_lm_loss) == 2
    assert all(math.isfinite(v) for v in res.sparse_kl + res.sparse_lm_loss)
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert "model.layers.1.self_attn.o_proj.weight" in moved  # the LM loss trains the model
    assert "model.layers.1.self_attn.indexer.wk.weight" in moved  # the KL trains the indexer
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert not model.training


def test_model_without_indexer_is_a_clear_error():
    cfg = build_config("nano", vocab_size=V, max_position_embeddings=32)
    with pytest.raises(UserError, match="no DSA indexer"):
        run_dsa_phases(init_model(cfg, seed=0), _batches(), DsaCfg())
