"""precision: bf16 trains under autocast with fp32 parameters: the loss falls like fp32's and
the weights differ from the fp32 run's (the forward really ran in bf16)."""

import json

import torch

from arcforge.config import OptimCfg
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.train.lm import train_lm
from arcforge.train.loop import Phase

# a fixed "corpus" with structure to learn: token t+1 = (token t + 1) mod 31
DATA = (torch.arange(33).unsqueeze(0) + torch.arange(64).unsqueeze(1)) % 31  # (64, 33)


def batch(step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    return DATA[torch.randint(0, 64, (8,), generator=g)]


def run(tmp_path, precision: str):
    model = init_model(build_config("nano", vocab_size=31, max_position_embeddings=64), seed=0)
    out = tmp_path / precision
    train_lm(
        model,
        [Phase(40, batch)],
        OptimCfg(lr=3e-3, warmup_steps=2),
        out,
        log_every=5,
        checkpoint_every=100,
        precision=precision,
    )
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return model, [r["loss"] for r in rows if "loss" in r]


def test_bf16_autocast_learns_with_fp32_weights(tmp_path):
    m32, l32 = run(tmp_path, "fp32")
    m16, l16 = run(tmp_path, "bf16")
    assert all(p.dtype == torch.float32 for p in m16.parameters())
    assert l16[-1] < 0.5 * l16[0] and l32[-1] < 0.5 * l32[0]  # both learn the pattern
    assert abs(l16[-1] - l32[-1]) < 0.25 * l32[0]
    w32, w16 = m32.state_dict(), m16.state_dict()
    assert any(not torch.equal(w32[k], w16[k]) for k in w32)  # bf16 really changed the math
