"""Speculative decoding with MTP drafts: greedy gives plain greedy's tokens, the logprobs are
the target's teacher-forced ones, and the acceptance rule keeps the target distribution."""

import pytest
import torch
from tiny_models import micro_llama_config
from torch.testing import assert_close

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model
from arcforge.model.mtp import MTPHead, align_mtp
from arcforge.model.presets import build_config
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.spec_decode import speculative_accept
from arcforge.train.lm import train_lm
from arcforge.train.loop import Phase

V, PAD = 32, 0


pytestmark = pytest.mark.usefixtures("one_thread")


def stride_rows(n: int, length: int, seed: int) -> torch.Tensor:
    """(n, length) rows t_{i+1} = t_i + s mod (V-1), shifted past PAD, stride s in {1, 2, 3}."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, V - 1, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    return 1 + (start + stride * torch.arange(length)) % (V - 1)  # (n, length)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny Llama and its MTP head trained together on stride rows: drafts get accepted."""
    torch.manual_seed(0)
    cfg = micro_llama_config(V, max_position_embeddings=128, pad_token_id=PAD)
    model, mtp = init_model(cfg, seed=0), MTPHead(cfg, draft_steps=3)
    optim = OptimCfg(lr=1e-2, warmup_steps=0, weight_decay=0.0)
    phases = [Phase(40, lambda step: stride_rows(16, 24, seed=step))]
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    train_lm(model, phases, optim, tmp_path_factory.mktemp("mtp"), mtp=mtp, log_every=100)
    torch.set_num_threads(n)
    return model.eval(), mtp.eval()


def teacher_forced(model, prompt, ids, temperature=1.0):
    full = torch.tensor([prompt + ids])  # (1, P + N)
    with torch.no_grad():
        logits = model(input_ids=full).logits[:, len(prompt) - 1 : -1] / temperature
    return token_logprobs(logits, full[:, len(prompt) :])[0]  # (N,)


PROMPTS = [[3, 5, 7, 9], [2, 3, 4, 5, 6, 7, 8], [11, 4, 20], [9]]


def test_greedy_equals_plain_greedy_with_accepted_and_rejected_drafts(trained):
    model, mtp = trained
    params = SamplingParams(max_new_tokens=24, temperature=0.0, stop_token_ids=[V - 1])
    plain = LocalEngine(model, pad_token_id=PAD).generate(PROMPTS, params)
    engine = LocalEngine(model, pad_token_id=PAD, mtp=mtp)
    spec = engine.generate(PROMPTS, params)
    assert [c.token_ids for c in spec] == [c.token_ids for c in plain]
    assert [c.finish_reason for c in spec] == [c.finish_reason for c in plain]
    s = engine.spec_stats
    assert 0 < s.accepted < s.drafted  # both the accept and the reject-and-crop paths ran
    assert s.mean_accept_length > 1.5
    for p, c in zip(PROMPTS, spec):
        want = teacher_forced(model, p, c.token_ids)
        assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("tempered", [False, True])
def test_sampled_logprobs_are_the_targets(trained, tempered):
    model, mtp = trained
    engine = LocalEngine(model, pad_token_id=PAD, mtp=mtp)
    params = SamplingParams(
        max_new_tokens=20, temperature=0.7, seed=3, n=2, tempered_logprobs=tempered
    )
    outs = engine.generate(PROMPTS, params)
    assert engine.spec_stats.accepted > 0
    assert [c.token_ids for c in outs] == [c.token_ids for c in engine.generate(PROMPTS, params)]
    for p, c in zip([p for p in PROMPTS for _ in range(2)], outs):
        assert len(c.token_ids) == 20 and c.finish_reason == "length"
        want = teacher_forced(model, p, c.token_ids, 0.7 if tempered else 1.0)
        assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)


def test_glm5_sparse_attention_cache_crop():
    """DSA's indexer keys live in the cache too: the crop on rejection must drop them as well.
    index_topk 8 < the context, so a stale indexer key would change the selected keys."""
    cfg = build_config(
        "glm5-tiny", vocab_size=V, max_position_embeddings=128, pad_token_id=PAD, index_topk=8
    )
    model = init_model(cfg, seed=0).eval()
    mtp = MTPHead(cfg, draft_steps=2)
    params = SamplingParams(max_new_tokens=16, temperature=0.0)
    prompts = [list(range(1, 13)), [4, 5]]
    plain = LocalEngine(model, pad_token_id=PAD).generate(prompts, params)
    spec_engine = LocalEngine(model, pad_token_id=PAD, mtp=mtp)
    assert [c.token_ids for c in spec_engine.generate(prompts, params)] == [
        c.token_ids for c in plain
    ]
    sampled = spec_engine.generate(prompts, SamplingParams(16, temperature=1.0, seed=0))
    assert spec_engine.spec_stats.accepted > 0  # an untrained head is near uniform, as is p
    for p, c in zip(prompts, sampled):
        want = teacher_forced(model, p, c.token_ids)
        assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)


def test_acceptance_rule_keeps_the_target_distribution():
    """One round with k=2 drafts on a 4-token vocabulary, 200k independent rows: the first
    emitted token is distributed as p_1, and the second, given a first accepted draft y, as
    p_2(. | y). The drafts come from a deliberately different q."""
    Vt, N = 4, 200_000  # k = 2 drafts
    g = torch.Generator().manual_seed(0)
    p1 = torch.tensor([0.5, 0.3, 0.15, 0.05])
    p2 = torch.tensor(
        [[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.25] * 4, [0.0, 0.0, 0.5, 0.5]]
    )
    p3 = torch.full((Vt, Vt, Vt), 1.0 / Vt)
    q1 = torch.tensor([0.1, 0.2, 0.3, 0.4])
    q2 = torch.tensor([0.4, 0.3, 0.2, 0.1])
    d1 = torch.multinomial(q1, N, replacement=True, generator=g)  # (N,)
    d2 = torch.multinomial(q2, N, replacement=True, generator=g)
    drafts = torch.stack([d1, d2], dim=1)  # (N, k)
    p = torch.stack([p1.expand(N, Vt), p2[d1], p3[d1, d2]], dim=1)  # (N, k+1, V)
    q = torch.stack([q1.expand(N, Vt), q2.expand(N, Vt)], dim=1)  # (N, k, V)
    n_acc, extra = speculative_accept(p, q, drafts, g)
    first = torch.where(n_acc >= 1, d1, extra)  # (N,)
    freq = torch.bincount(first, minlength=Vt) / N
    sigma = (p1 * (1 - p1) / N).sqrt()
    assert ((freq - p1).abs() <= 5 * sigma + 1e-9).all(), (freq, p1)
    assert ((q1 - p1).abs() > 50 * sigma).any()  # accepting every draft would fail this test
    y = 1  # second token, given the first draft y was accepted
    rows = (n_acc >= 1) & (d1 == y)
    second = torch.where(n_acc[rows] >= 2, d2[rows], extra[rows])
    m = int(rows.sum())
    freq2 = torch.bincount(second, minlength=Vt) / m
    sigma2 = (p2[y] * (1 - p2[y]) / m).sqrt()
    assert ((freq2 - p2[y]).abs() <= 5 * sigma2 + 1e-9).all(), (freq2, p2[y])


def test_greedy_acceptance_is_exact_argmax():
    """One-hot p and q (temperature 0): drafts are kept while they are the target's argmax and
    the extra token is the argmax at the first mismatch (or after the last draft)."""
    eye = torch.eye(5)
    p = eye[[2, 4, 1, 3]][None]  # (1, 4, 5) argmaxes 2, 4, 1, then 3
    q = eye[[2, 4, 0]][None]  # drafts 2, 4, 0
    n, extra = speculative_accept(p, q, torch.tensor([[2, 4, 0]]))
    assert n.tolist() == [2] and extra.tolist() == [1]
    n, extra = speculative_accept(p, eye[[2, 4, 1]][None], torch.tensor([[2, 4, 1]]))
    assert n.tolist() == [3] and extra.tolist() == [3]


def test_align_mtp_raises_acceptance_and_leaves_the_model_as_it_was(trained):
    model, _ = trained
    mtp = MTPHead(model.config, draft_steps=2)  # untrained: its drafts are noise
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = [
        (p.requires_grad, None if p.grad is None else p.grad.clone()) for p in model.parameters()
    ]
    params = SamplingParams(max_new_tokens=20, temperature=0.0)

    def acceptance() -> float:
        engine = LocalEngine(model, pad_token_id=PAD, mtp=mtp.eval())
        engine.generate(PROMPTS, params)
        stats = engine.spec_stats
        return stats.accepted / stats.drafted

    untrained = acceptance()
    losses = align_mtp(model, mtp, stride_rows(64, 24, seed=99), steps=40, lr=1e-2)
    assert losses[-1] < 0.5 * losses[0]
    aligned = acceptance()
    assert aligned > untrained + 0.3, (untrained, aligned)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    for p, (requires_grad, grad) in zip(model.parameters(), flags):  # no gradient reached it
        assert p.requires_grad == requires_grad
        assert (p.grad is None) if grad is None else torch.equal(p.grad, grad)
    assert not model.training
