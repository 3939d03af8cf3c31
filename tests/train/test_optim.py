"""Muon and Muon Split (arcforge.train.optim): which parameters each half gets, orthogonalised
updates on a GLM-5 (MLA + MoE) model, exact resume of the joint optimizer state."""

import math

import pytest
import torch
from torch.testing import assert_close

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.train.loop import Phase, train_loop
from arcforge.train.optim import BlockMuon, build_optimizer, newton_schulz

V = 64


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread, no contention on a busy 2-core machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _model(seed: int = 0):
    cfg = build_config("glm5-tiny", vocab_size=V, max_position_embeddings=64, num_hidden_layers=2)
    return init_model(cfg, seed)  # layer 0 dense MLP, layer 1 MoE


def _spread(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Matrices (..., m, n) with singular values spread evenly over [0.1, 1]."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = torch.linalg.qr(torch.randn(*shape[:-2], m, k, generator=g))
    v, _ = torch.linalg.qr(torch.randn(*shape[:-2], n, k, generator=g))
    return (u * torch.linspace(1.0, 0.1, k)) @ v.mT


def _spread_grads(model, seed: int = 0) -> None:
    """Gradients whose matrices have condition number 10, so an orthogonalised update (~1) is
    told apart from the raw one; MLA's up-projections get it per head (blocks of rows)."""
    g = torch.Generator().manual_seed(seed)
    heads = model.config.num_attention_heads
    for name, p in model.named_parameters():
        if p.dim() < 2:
            p.grad = torch.randn(p.shape, generator=g)
        elif name.endswith(("q_b_proj.weight", "kv_b_proj.weight")):  # (heads * d, rank)
            p.grad = _spread((heads, p.shape[0] // heads, p.shape[1]), g).reshape(p.shape)
        else:
            p.grad = _spread(tuple(p.shape), g)


def _step(name: str):
    model = _model()
    opt = build_optimizer(model, OptimCfg(name=name, lr=1e-2, weight_decay=0.0))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    _spread_grads(model)
    opt.step()
    delta = {n: before[n] - p.detach() for n, p in model.named_parameters()}
    return model, opt, delta


def _svals(update: torch.Tensor, lr: float = 1e-2) -> torch.Tensor:
    scale = lr * 0.2 * math.sqrt(max(update.shape[-2:]))  # Muon's "match_rms_adamw" lr
    return torch.linalg.svdvals(update / scale)


def test_newton_schulz_flattens_the_spectrum():
    g = torch.randn(48, 24) @ torch.diag(torch.logspace(0, -1, 24))  # condition number ~10+
    s = torch.linalg.svdvals(newton_schulz(g))
    assert s.min() > 0.6 and s.max() < 1.25, s  # quintic NS: S' within about [0.7, 1.2]


def test_muon_groups_and_orthogonal_updates():
    model, opt, delta = _step("muon")
    kinds = {
        id(p): type(o).__name__ for o in opt.optimizers for g in o.param_groups for p in g["params"]
    }
    named = dict(model.named_parameters())
    for muon in ("self_attn.kv_b_proj.weight", "mlp.gate_proj.weight"):
        assert kinds[id(named[f"model.layers.0.{muon}"])] == "BlockMuon", muon
    assert kinds[id(named["model.layers.1.mlp.experts.gate_up_proj"])] == "BlockMuon"
    for adamw in (
        "model.embed_tokens.weight",
        "model.layers.1.mlp.gate.weight",
        "model.norm.weight",
    ):
        assert kinds[id(named[adamw])] == "AdamW", adamw
    for name in (
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.self_attn.q_a_proj.weight",
    ):
        s = _svals(delta[name])
        assert s.min() > 0.6 and s.max() < 1.25, (name, s)  # the gradient's ratio is 10
    for e in delta["model.layers.1.mlp.experts.down_proj"]:  # each expert its own matrix
        s = _svals(e)
        assert s.min() > 0.6 and s.max() < 1.25, s
    emb = delta["model.embed_tokens.weight"]  # AdamW's first step: lr * sign(grad)
    assert_close(emb.abs(), torch.full_like(emb, 1e-2), rtol=1e-2, atol=0)  # up to eps


def test_muon_split_orthogonalises_each_head():
    model, _, split = _step("muon_split")
    _, _, whole = _step("muon")
    heads = model.config.num_attention_heads
    for proj in ("q_b_proj", "kv_b_proj"):
        name = f"model.layers.1.self_attn.{proj}.weight"
        for blocks, per_head in ((split[name], True), (whole[name], False)):
            s = [_svals(b) for b in blocks.reshape(heads, -1, blocks.shape[-1])]
            spread = max(float(x.max() / x.min()) for x in s)
            if per_head:
                assert all(x.min() > 0.6 and x.max() < 1.25 for x in s), (proj, s)
            else:  # a head's rows of a whole-matrix orthogonalisation are not orthogonal
                assert spread > 2.0, (proj, spread)
    other = "model.layers.1.self_attn.o_proj.weight"  # not an up-projection: the same update
    assert_close(split[other], whole[other])


def test_block_muon_matches_torch_muon_on_one_block():
    # blocks=1 on a 2-D matrix is plain Muon: same momentum, scaling and (up to torch's bf16
    # Newton-Schulz) the same update as torch.optim.Muon
    w = torch.randn(32, 16)
    a, b = torch.nn.Parameter(w.clone()), torch.nn.Parameter(w.clone())
    mine = BlockMuon([a], lr=0.1, weight_decay=0.1)
    ref = torch.optim.Muon([b], lr=0.1, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    for step in range(3):
        g = torch.randn(32, 16, generator=torch.Generator().manual_seed(step))
        a.grad, b.grad = g.clone(), g.clone()
        mine.step()
        ref.step()
    assert_close(a.detach(), b.detach(), atol=2e-2, rtol=0)  # bf16 vs fp32 iterations
    assert (a.detach() - w).abs().max() > 0.1  # and both moved


def test_resume_equals_uninterrupted(tmp_path):
    data = torch.randint(0, V, (16, 17), generator=torch.Generator().manual_seed(0))

    def batch(step):
        return data[torch.randint(0, 16, (4,), generator=torch.Generator().manual_seed(step))]

    def loss_fn(model, ids):
        out = model(input_ids=ids, labels=ids)
        return out.loss, ids.numel()

    cfg = OptimCfg(name="muon_split", lr=1e-2, warmup_steps=1)
    a = _model()
    res = train_loop(a, [Phase(4, batch)], loss_fn, cfg, tmp_path / "a", checkpoint_every=2)
    b = _model()
    train_loop(b, [Phase(4, batch)], loss_fn, cfg, tmp_path / "b", checkpoint_every=2, stop_after=2)
    b = _model(seed=1)  # as a fresh process: weights and moments come from the state
    rb = train_loop(b, [Phase(4, batch)], loss_fn, cfg, tmp_path / "b", checkpoint_every=2)
    assert rb.resumed_from == 2
    assert res.final_loss < 4.1  # ln(64) = 4.16 at init: the model trains
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert_close(p, q, atol=1e-6, rtol=0, msg=n)


def test_resuming_with_another_optimizer_is_one_clear_error():
    model = _model()
    adamw = build_optimizer(model, OptimCfg()).state_dict()
    muon = build_optimizer(model, OptimCfg(name="muon"))
    with pytest.raises(ValueError, match="resume with the optim.name"):
        muon.load_state_dict(adamw)
    _spread_grads(model)
    muon.step()
    assert len(muon.state) > 0
    muon.state.clear()  # what async RL does to forget old moments
    assert len(muon.state) == 0
