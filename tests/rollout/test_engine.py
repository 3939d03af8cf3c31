"""LocalEngine against the trainer's own fp32 forward, on tiny in-process models."""

import pytest
import torch
from tiny_models import SMALL_LLAMA, small_llama
from torch.testing import assert_close
from transformers import LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from arcforge.rl.losses import token_logprobs
from arcforge.rollout.engines.base import Completion, Engine, SamplingParams
from arcforge.rollout.engines.local import LocalEngine

PAD = 0
PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [20], [30, 31, 32, 33, 34]]


@pytest.fixture(scope="module")
def model():
    return small_llama()


def teacher_forced(model, prompt, completion_ids, temperature=1.0):
    """Logprobs of completion_ids from one unpadded fp32 forward (what the trainer computes)."""
    ids = torch.tensor([prompt + completion_ids])  # (1, P + N)
    with torch.no_grad():
        logits = model(ids).logits[:, :-1] / temperature  # (1, P + N - 1, V)
    return token_logprobs(logits, ids[:, 1:])[0, len(prompt) - 1 :]  # (N,)


def max_logprob_error(model, prompts, outs):
    return max(
        (teacher_forced(model, p, c.token_ids) - torch.tensor(c.logprobs)).abs().max().item()
        for p, c in zip(prompts, outs)
    )


@pytest.mark.parametrize("fast", [True, False])
def test_logprobs_equal_training_forward(model, fast):
    engine = LocalEngine(model, pad_token_id=PAD, fast=fast)
    assert isinstance(engine, Engine)
    outs = engine.generate(PROMPTS, SamplingParams(max_new_tokens=12, temperature=1.0, seed=1))
    assert all(len(c.token_ids) == 12 and c.finish_reason == "length" for c in outs)
    assert max_logprob_error(model, PROMPTS, outs) < 1e-5  # left-padded batch, fp32


def test_qwen3_fast_path_logprobs():
    torch.manual_seed(0)
    qwen = Qwen3ForCausalLM(Qwen3Config(**SMALL_LLAMA, head_dim=16)).eval()
    outs = LocalEngine(qwen, pad_token_id=PAD).generate(PROMPTS, SamplingParams(10, seed=0))
    assert max_logprob_error(qwen, PROMPTS, outs) < 1e-5


def test_logprobs_are_raw_not_temperature_scaled(model):
    # Documented choice: logprobs = log_softmax(raw logits), whatever the temperature.
    outs = LocalEngine(model, pad_token_id=PAD).generate(
        PROMPTS, SamplingParams(max_new_tokens=8, temperature=0.5, top_k=20, seed=2)
    )
    assert max_logprob_error(model, PROMPTS, outs) < 1e-5
    scaled = teacher_forced(model, PROMPTS[0], outs[0].token_ids, temperature=0.5)
    assert (scaled - torch.tensor(outs[0].logprobs)).abs().max() > 0.1


@pytest.mark.parametrize("fast", [True, False])
def test_tempered_logprobs_are_the_sampling_temperatures_and_the_trainers(model, fast):
    """tempered_logprobs: each logprob is log_softmax(logits / T), the tempered policy the token
    was drawn from, and it equals the trainer's recompute with the same T (sequence_logprobs);
    the same seed draws the same tokens as with raw logprobs."""
    from arcforge.train.rollout_batch import pad_trajectories, sequence_logprobs
    from arcforge.types import Segment, Trajectory

    engine = LocalEngine(model, pad_token_id=PAD, fast=fast)
    params = SamplingParams(max_new_tokens=8, temperature=0.6, seed=3, tempered_logprobs=True)
    outs = engine.generate(PROMPTS, params)
    raw = engine.generate(PROMPTS, SamplingParams(max_new_tokens=8, temperature=0.6, seed=3))
    assert [c.token_ids for c in outs] == [c.token_ids for c in raw]
    for p, c in zip(PROMPTS, outs):
        want = teacher_forced(model, p, c.token_ids, temperature=0.6)
        assert_close(torch.tensor(c.logprobs), want, atol=1e-5, rtol=0)
    assert max_logprob_error(model, PROMPTS, outs) > 0.05  # not the raw logprobs
    trajs = [
        Trajectory(
            [
                Segment(p, "env", [0] * len(p)),
                Segment(c.token_ids, "model", [1] * len(c.token_ids), c.logprobs, 0),
            ]
        )
        for p, c in zip(PROMPTS, outs)
    ]
    tb = pad_trajectories(trajs, PAD)
    with torch.no_grad():
        mine = sequence_logprobs(model, tb, temperature=0.6)  # (B, T)
    assert ((mine - tb.logp_infer).abs() * tb.mask).max() < 1e-5


def test_greedy_batched_equals_unbatched_and_fast_equals_hf(model):
    params = SamplingParams(max_new_tokens=10, temperature=0.0)
    engine = LocalEngine(model, pad_token_id=PAD)
    batched = engine.generate(PROMPTS, params)
    single = [engine.generate([p], params)[0] for p in PROMPTS]
    hf_path = LocalEngine(model, pad_token_id=PAD, fast=False).generate(PROMPTS, params)
    chunked = LocalEngine(model, pad_token_id=PAD, max_batch=3).generate(PROMPTS, params)
    for b, s, h, c in zip(batched, single, hf_path, chunked):
        assert b.token_ids == s.token_ids == h.token_ids == c.token_ids
    # greedy = argmax of the model: each logprob is the row's max logprob
    assert max_logprob_error(model, PROMPTS, batched) < 1e-5


def test_top_k_1_and_tiny_top_p_equal_greedy(model):
    engine = LocalEngine(model, pad_token_id=PAD)
    greedy = engine.generate(PROMPTS, SamplingParams(max_new_tokens=10, temperature=0.0))
    top_k = engine.generate(PROMPTS, SamplingParams(max_new_tokens=10, top_k=1, seed=3))
    top_p = engine.generate(PROMPTS, SamplingParams(max_new_tokens=10, top_p=1e-6, seed=3))
    assert [c.token_ids for c in greedy] == [c.token_ids for c in top_k]
    assert [c.token_ids for c in greedy] == [c.token_ids for c in top_p]


def test_stop_tokens_and_dropped_rows(model):
    engine = LocalEngine(model, pad_token_id=PAD)
    free = engine.generate(PROMPTS, SamplingParams(max_new_tokens=12, temperature=0.0))
    stop = free[0].token_ids[2]  # a token row 0 emits at step 3
    outs = engine.generate(
        PROMPTS, SamplingParams(max_new_tokens=12, temperature=0.0, stop_token_ids=[stop])
    )
    n_stopped = 0
    for f, o in zip(free, outs):
        if stop in f.token_ids:  # truncated after the first stop token, which is kept
            k = f.token_ids.index(stop) + 1
            assert (o.token_ids, o.finish_reason) == (f.token_ids[:k], "stop")
            n_stopped += 1
        else:  # rows that keep going are unaffected by finished rows leaving the batch
            assert (o.token_ids, o.finish_reason) == (f.token_ids, "length")
        assert_close(torch.tensor(o.logprobs), torch.tensor(f.logprobs[: len(o.logprobs)]))
    assert 1 <= n_stopped < len(PROMPTS), "pick a stop token that ends only some rows"


def test_seeds(model):
    engine = LocalEngine(model, pad_token_id=PAD)
    p = SamplingParams(max_new_tokens=10, seed=7, n=2)
    a, b = engine.generate(PROMPTS[:2], p), engine.generate(PROMPTS[:2], p)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert len(a) == 4 and a[0].token_ids != a[1].token_ids  # n samples of a prompt differ
    # row 0 has seed 7 + 0 in both calls: same tokens whatever else is in the batch
    c = engine.generate([PROMPTS[0], PROMPTS[3]], p)
    assert c[0].token_ids == a[0].token_ids and c[1].token_ids == a[1].token_ids
    other = engine.generate(PROMPTS[:2], SamplingParams(max_new_tokens=10, seed=8, n=2))
    assert [x.token_ids for x in other] != [x.token_ids for x in a]


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_low_precision_mismatch_is_real_but_small(model, precision):
    params = SamplingParams(max_new_tokens=12, seed=0)
    outs = LocalEngine(model, pad_token_id=PAD, precision=precision).generate(PROMPTS, params)
    diffs = torch.cat(
        [
            teacher_forced(model, p, c.token_ids) - torch.tensor(c.logprobs)
            for p, c in zip(PROMPTS, outs)
        ]
    ).abs()
    assert diffs.max() > 1e-4  # measurably different from the fp32 trainer ...
    assert diffs.mean() < 0.05  # ... but close


def test_engine_keeps_its_own_weights_until_load_weights(model):
    trainer = LlamaForCausalLM(model.config).eval()
    trainer.load_state_dict(model.state_dict())
    engine = LocalEngine(trainer, pad_token_id=PAD)
    params = SamplingParams(max_new_tokens=8, temperature=0.0)
    before = engine.generate(PROMPTS, params)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a "training step" on the trainer's model
        for w in trainer.parameters():
            w.add_(torch.randn(w.shape, generator=g) * 0.1)
    assert [c.token_ids for c in engine.generate(PROMPTS, params)] == [c.token_ids for c in before]
    assert engine.version == 0
    engine.load_weights(trainer.state_dict(), version=1)
    after = engine.generate(PROMPTS, params)
    assert engine.version == 1
    assert [c.token_ids for c in after] != [c.token_ids for c in before]
    assert max_logprob_error(trainer, PROMPTS, after) < 1e-5


def test_bad_input(model):
    engine = LocalEngine(model, pad_token_id=PAD)
    with pytest.raises(ValueError, match="at least one token"):
        engine.generate([[]], SamplingParams())
    with pytest.raises(ValueError, match="max_position_embeddings"):
        engine.generate([[1] * 250], SamplingParams(max_new_tokens=10))
    with pytest.raises(ValueError, match="precision"):
        LocalEngine(model, pad_token_id=PAD, precision="fp8")
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    assert Completion([1], [0.0], "stop").finish_reason == "stop"
