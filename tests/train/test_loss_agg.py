"""`loss_agg`: token-mean versus sequence-mean aggregation of the policy loss, through the real
`policy_backward` on a nano model (every trajectory of a different length)."""

from __future__ import annotations

import pytest
import torch

from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.stages.agentic_rl import AgenticRLStageCfg
from arcforge.stages.rl import RLStageCfg
from arcforge.train.rl import policy_backward
from arcforge.train.rollout_batch import TokenBatch, sequence_logprobs, sequence_weighted

V, T = 24, 9


def test_sequence_weights_give_every_row_the_mean_length():
    mask = torch.zeros(3, 6)
    mask[0, :2] = 1  # 2 trained tokens
    mask[1, 1:] = 1  # 5
    w = sequence_weighted(mask)  # row 2 trains nothing
    assert torch.allclose(w.sum(1), torch.tensor([3.5, 3.5, 0.0]))
    assert torch.allclose(w.sum(), mask.sum())
    assert torch.equal(w > 0, mask > 0)
    assert torch.equal(sequence_weighted(torch.zeros(2, 3)), torch.zeros(2, 3))


def _model() -> torch.nn.Module:
    conf = build_config("nano", vocab_size=V, max_position_embeddings=16)
    return init_model(conf, seed=0)


def _batch(model) -> TokenBatch:
    """Three rows trained on 2, 8 and 5 tokens; the rollout logprobs are the model's own
    shifted by a little noise, so the ratios sit inside the trust region but are not 1."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, V, (3, T + 1), generator=g)
    mask = torch.zeros(3, T)
    mask[0, 5:7] = 1
    mask[1, 1:] = 1
    mask[2, :5] = 1
    b = TokenBatch(ids[:, :-1], ids[:, 1:], mask, torch.zeros(3, T), torch.tensor([1.0, -1.0, 0.5]))
    with torch.no_grad():
        b.logp_infer = sequence_logprobs(model, b) + 0.05 * torch.randn(3, T, generator=g)
    return b


def _cfg(agg: str, micro_batch: int) -> RLStageCfg:
    return RLStageCfg.model_validate(
        dict(
            name="rl",
            kind="rl",
            sources=[{"source": "world:reasoning"}],
            loss="double_sided_is",
            loss_agg=agg,
            micro_batch=micro_batch,
        )
    )


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def _reference_grads(model, b: TokenBatch, per_sequence: bool) -> torch.Tensor:
    """The objective written out by hand: r_t · A over trained tokens, averaged per token of
    the batch or per sequence (then over sequences)."""
    model.zero_grad()
    ratio = torch.exp(sequence_logprobs(model, b) - b.logp_infer)  # (B, T)
    obj = ratio * b.advantages[:, None] * b.mask  # (B, T)
    if per_sequence:
        loss = -(obj.sum(1) / b.mask.sum(1)).mean()
    else:
        loss = -obj.sum() / b.mask.sum()
    loss.backward()
    return _grads(model)


@pytest.mark.parametrize("micro_batch", [1, 3])
def test_seq_mean_weighs_every_trajectory_the_same(micro_batch):
    model = _model()
    for agg, per_sequence in (("token_mean", False), ("seq_mean", True)):
        b = _batch(model)
        want = _reference_grads(model, b, per_sequence)
        model.zero_grad()
        policy_backward(model, b, _cfg(agg, micro_batch))
        assert torch.allclose(_grads(model), want, atol=1e-6), agg
    # the two aggregations really differ when lengths differ
    assert not torch.allclose(
        _reference_grads(model, _batch(model), True),
        _reference_grads(model, _batch(model), False),
        atol=1e-4,
    )


def test_loss_agg_is_validated():
    with pytest.raises(ValueError, match="loss_agg"):
        _cfg("sequence", 1)
    base = dict(name="a", kind="agentic_rl", sources=[{"source": "world:tool"}])
    assert AgenticRLStageCfg.model_validate({**base, "loss_agg": "seq_mean"}).loss_agg == "seq_mean"
    with pytest.raises(ValueError, match="loss_agg"):
        AgenticRLStageCfg.model_validate({**base, "loss_agg": "mean"})


@pytest.mark.parametrize("agg", ["token_mean", "seq_mean"])
def test_zero_advantage_rows_are_skipped_without_changing_the_gradient(agg):
    """A row with advantage 0 (a group with one reward) adds nothing to the objective; it is not
    forwarded, yet still counts in the token mean's denominator, so the gradient and the loss
    are those of the whole batch."""
    model = _model()
    b = _batch(model)
    b.advantages = torch.tensor([1.0, 0.0, 0.5])  # row 1 (8 trained tokens) has no signal
    want = _reference_grads(model, b, agg == "seq_mean")
    rows: list[int] = []
    hook = model.register_forward_hook(
        lambda m, args, kw, out: rows.append(kw["input_ids"].shape[0]), with_kwargs=True
    )
    model.zero_grad()
    stats = policy_backward(model, b, _cfg(agg, 3))
    hook.remove()
    assert torch.allclose(_grads(model), want, atol=1e-6)
    assert rows == [2]  # one micro-batch of the two rows with signal
    with torch.no_grad():  # the reported loss is the whole batch's token mean
        ratio = torch.exp(sequence_logprobs(model, b) - b.logp_infer)
        mask = sequence_weighted(b.mask) if agg == "seq_mean" else b.mask
        full = -(ratio * b.advantages[:, None] * mask).sum() / mask.sum()
    assert stats["loss"] == pytest.approx(full.item(), abs=1e-6)
    assert 0.9 < stats["ratio_mean"] < 1.1  # a mean over the kept rows' tokens, not diluted
    b.advantages = torch.zeros(3)
    model.zero_grad()
    assert policy_backward(model, b, _cfg(agg, 3)) == {"loss": 0.0}
    assert all(p.grad is None for p in model.parameters())
