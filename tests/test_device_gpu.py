"""`device: cuda` for real: the trainers, the rollout engine and a whole small pipeline on a GPU.

Each check runs the same thing on the CPU and on the GPU and compares: one LM training step,
one RL policy update (gradients), greedy generation from the engine. The last test runs the
smoke pipeline (world, tokenizer, pretrain, mid-train, SFT, reasoning RL, evaluation) with
`device: cuda` and checks that the GPU did the work. Skipped without CUDA (`-m gpu` runs them).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

import arcforge.device as device
from arcforge.config import OptimCfg
from arcforge.device import model_device
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import SamplingParams
from arcforge.rollout.engines.local import LocalEngine
from arcforge.run_config import load_config
from arcforge.stages.rl import RLStageCfg
from arcforge.train.lm import train_lm
from arcforge.train.loop import Phase
from arcforge.train.rl import policy_backward
from arcforge.train.rollout_batch import TokenBatch, sequence_logprobs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
GPU = torch.device("cuda:0")
V = 64
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _exact_fp32():
    """fp32 matmuls without TF32 on both sides, so CPU and GPU agree to rounding."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    device._RUN_DEVICE = torch.device("cpu")


def _pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    model = init_model(build_config("nano", vocab_size=V, max_position_embeddings=64), seed=0)
    return model, copy.deepcopy(model).to(GPU)


def test_lm_training_on_the_gpu_matches_the_cpu(tmp_path):
    data = torch.randint(0, V, (16, 33), generator=torch.Generator().manual_seed(0))
    cpu, gpu = _pair()
    losses = {}
    for name, m in (("cpu", cpu), ("gpu", gpu)):
        res = train_lm(
            m,
            [Phase(6, lambda s: data[(s * 4) % 16 : (s * 4) % 16 + 4])],
            OptimCfg(lr=1e-3, warmup_steps=0),
            tmp_path / name,
            log_every=1,
            checkpoint_every=3,
        )
        losses[name] = [r["loss"] for r in res.history]
    assert model_device(gpu) == GPU and model_device(cpu).type == "cpu"
    assert losses["cpu"] == pytest.approx(losses["gpu"], rel=1e-4)
    assert losses["gpu"][-1] < losses["gpu"][0]  # it trained
    for (k, a), b in zip(cpu.state_dict().items(), gpu.state_dict().values()):
        assert torch.allclose(a, b.cpu(), atol=1e-4), k


def test_rl_policy_update_on_the_gpu_matches_the_cpu():
    cpu, gpu = _pair()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (6, 17), generator=g)
    mask = (torch.rand(6, 16, generator=g) > 0.3).float()
    b = TokenBatch(ids[:, :-1], ids[:, 1:], mask, torch.zeros(6, 16), torch.randn(6, generator=g))
    with torch.no_grad():
        b.logp_infer = sequence_logprobs(cpu, b) + 0.05 * torch.randn(6, 16, generator=g)
    assert b.logp_infer.device.type == "cpu"
    cfg = RLStageCfg.model_validate(
        dict(
            name="rl",
            kind="rl",
            sources=[{"source": "world:reasoning"}],
            loss="grpo_icepop",
            micro_batch=4,
        )
    )
    st_cpu = policy_backward(cpu, copy.deepcopy(b), cfg)
    st_gpu = policy_backward(gpu, copy.deepcopy(b), cfg)  # the batch stays on the CPU
    assert st_cpu["loss"] == pytest.approx(st_gpu["loss"], rel=1e-4, abs=1e-6)
    for (k, p), q in zip(cpu.named_parameters(), gpu.parameters()):
        assert q.grad is not None and q.grad.device == GPU
        assert torch.allclose(p.grad, q.grad.cpu(), atol=1e-5), k


def test_the_engine_generates_the_same_greedy_tokens_on_the_gpu():
    cpu, gpu = _pair()
    prompts = [[1, 2, 3], [5, 6, 7, 8, 9, 10], [11]]
    params = SamplingParams(max_new_tokens=12, temperature=0.0)
    a = LocalEngine(cpu, pad_token_id=0).generate(prompts, params)
    b = LocalEngine(gpu, pad_token_id=0).generate(prompts, params)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    for x, y in zip(a, b):
        assert x.logprobs == pytest.approx(y.logprobs, abs=1e-3)
    sampled = LocalEngine(gpu, pad_token_id=0).generate(
        prompts, SamplingParams(max_new_tokens=8, temperature=1.0, seed=3)
    )
    assert all(len(c.token_ids) == 8 and all(0 <= t < V for t in c.token_ids) for c in sampled)


def test_the_smoke_pipeline_runs_on_the_gpu(tmp_path):
    from arcforge.pipeline import run_pipeline

    cfg = load_config(ROOT / "configs" / "smoke.yaml")
    cfg.device = "cuda"
    cfg.stages = [s for s in cfg.stages if s.name in ("pretrain", "midtrain", "sft", "rl")]
    torch.cuda.reset_peak_memory_stats()
    run = run_pipeline(cfg, tmp_path / "run")
    assert torch.cuda.max_memory_allocated() > 0
    for stage in ("pretrain", "midtrain", "sft", "rl"):
        assert (run / stage / "checkpoint" / "config.json").exists(), stage
        scores = json.loads((run / "eval" / f"{stage}.json").read_text())
        assert scores, stage
    rows = [json.loads(x) for x in (run / "pretrain" / "metrics.jsonl").read_text().splitlines()]
    held = [r["heldout_loss"] for r in rows if "heldout_loss" in r]
    assert held[-1] < held[0]  # pretraining on the GPU learned
