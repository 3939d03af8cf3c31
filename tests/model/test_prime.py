"""Induction-head priming (arcforge/model/prime.py) and synthetic copy rows
(arcforge/data/copy_rows.py): the planted circuit is there at init, and a primed model learns to
copy from random-token repeats in a few hundred steps where a stock-initialised one does not."""

import pytest
import torch

from arcforge.config import OptimCfg
from arcforge.data.copy_rows import copy_rows, plain_token_ids
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.model.prime import copy_config_fields, init_for_copying
from arcforge.train.optim import build_optimizer, lr_at

V, T = 256, 48
STEPS = 250
SIZE = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
}  # head dim 32


def _model(primed: bool, layers: int = 2):
    fields = copy_config_fields() if primed else {}
    cfg = build_config("tiny", V, 256, num_hidden_layers=layers, **SIZE, **fields)
    m = init_model(cfg, seed=0)
    if primed:
        init_for_copying(m, seed=0)
    return m


def _repeat_batch(n: int = 8, seed: int = 0) -> tuple[torch.Tensor, int]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (n, T), generator=g)
    half = T // 2
    x[:, half:] = x[:, :half]
    return x, half


def _repeat_accuracy(m, x: torch.Tensor, half: int) -> float:
    with torch.inference_mode():
        pred = m(input_ids=x).logits[:, half:-1].argmax(-1)
    return (pred == x[:, half + 1 :]).float().mean().item()


def test_planted_heads_attend_to_previous_token_and_to_the_match():
    m = _model(True)
    m.config._attn_implementation = "eager"
    x, half = _repeat_batch()
    with torch.inference_mode():
        att = m(input_ids=x, output_attentions=True).attentions
    pos = torch.arange(half + 1, T)
    prev = att[0][:, 0][:, pos, pos - 1].mean().item()
    match = att[1][:, 0][:, pos, pos - half + 1].mean().item()
    other = att[1][:, 1][:, pos, pos - half + 1].mean().item()  # an unplanted head
    assert prev > 0.95
    assert match > 5 * max(other, 1.0 / T)


def test_priming_refuses_tied_or_biasless_configs():
    stock = init_model(build_config("tiny", V, 256, num_hidden_layers=2), seed=0)
    with pytest.raises(ValueError, match="untied"):
        init_for_copying(stock)
    tied_bias = init_model(
        build_config("tiny", V, 256, num_hidden_layers=2, attention_bias=True), 0
    )
    with pytest.raises(ValueError, match="untied"):
        init_for_copying(tied_bias)
    untied = init_model(
        build_config("tiny", V, 256, num_hidden_layers=2, tie_word_embeddings=False), 0
    )
    with pytest.raises(ValueError, match="attention_bias"):
        init_for_copying(untied)


def _train_on_copy_rows(m, steps: int) -> None:
    torch.manual_seed(0)
    cfg = OptimCfg(lr=3e-3, warmup_steps=20)
    opt = build_optimizer(m, cfg)
    ids = torch.arange(V)
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, cfg)
        b = copy_rows(16, T, ids, seed=step)
        logits = m(input_ids=b[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), b[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_primed_model_learns_to_copy_where_a_stock_one_does_not():
    x, half = _repeat_batch(16, seed=99)
    results = {}
    for primed in (True, False):
        m = _model(primed)
        _train_on_copy_rows(m, STEPS)
        results[primed] = _repeat_accuracy(m.eval(), x, half)
    assert results[True] > 0.5, results
    assert results[False] < 0.1, results


def test_copy_rows_repeat_a_span_deterministically():
    ids = torch.arange(10, 500)
    a = copy_rows(6, 32, ids, seed=3)
    assert a.shape == (6, 33)
    assert torch.equal(a, copy_rows(6, 32, ids, seed=3))
    assert not torch.equal(a, copy_rows(6, 32, ids, seed=4))
    assert bool(((a >= 10) & (a < 500)).all())
    for row in a.tolist():  # some span of >= 4 tokens occurs twice
        grams = [tuple(row[i : i + 4]) for i in range(len(row) - 3)]
        assert len(set(grams)) < len(grams)
    with pytest.raises(ValueError, match="seq_len"):
        copy_rows(1, 4, ids, seed=0)


def test_plain_token_ids_leave_out_special_tokens(tok):
    ids = set(plain_token_ids(tok).tolist())
    assert not ids & set(tok.all_special_ids)
    assert len(ids) == len(tok) - len(set(tok.all_special_ids))


def test_lm_stage_phases_mix_copy_rows_deterministically():
    from arcforge.stages.lm import LMStageCfg, build_phases

    batches = dict(seq_len=16, tokens_per_batch=128, tokens=128 * 5)  # 5 steps of 8 rows
    warmup = dict(copy_warmup_steps=3, copy_rows=0.25)
    source = [{"source": "world:corpus"}]
    stage = LMStageCfg(name="pre", kind="pretrain", sources=source, **batches, **warmup)
    corpus = list(range(1000, 1000 + 5000))  # ids no copy row draws
    copy_ids = torch.arange(10, 200)
    phases = build_phases(stage, [corpus], [1.0], copy_ids)
    assert [p.name for p in phases] == ["copy", "ctx16"]
    assert [p.steps for p in phases] == [3, 5]
    warm = phases[0].batch_fn(1)
    assert warm.shape == (8, 17) and bool((warm < 200).all())
    b = phases[1].batch_fn(2)
    assert b.shape == (8, 17)
    from_copy = (b < 200).all(dim=1)
    assert from_copy.sum().item() == 2 and bool((b[~from_copy] >= 1000).all())
    assert torch.equal(b, phases[1].batch_fn(2))  # a resumed run sees the same batch
    assert not torch.equal(b, phases[1].batch_fn(3))
