"""A training run killed with SIGKILL mid-stage and resumed ends with the same weights as an
uninterrupted run (within 1e-6), and its metrics log has no duplicated steps."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

SCRIPT = r"""
import sys, torch
from pathlib import Path
from arcforge.config import OptimCfg
from arcforge.model.presets import build_config
from arcforge.model.checkpoint import init_model
from arcforge.train.loop import Phase
from arcforge.train.lm import train_lm
from safetensors.torch import save_file

torch.set_num_threads(1)
out = Path(sys.argv[1])
model = init_model(build_config("nano", vocab_size=97, max_position_embeddings=128), seed=0)
g = torch.Generator().manual_seed(0)
data = torch.randint(0, 97, (64, 33), generator=g)  # (N, T+1) fixed "corpus"
def batch(step):  # deterministic in the step, like the packed datasets
    gg = torch.Generator().manual_seed(step)
    return data[torch.randint(0, 64, (8,), generator=gg)]
def theta(m):  # a phase hook that must be re-applied on resume
    from arcforge.model.checkpoint import set_rope_theta
    set_rope_theta(m, 50000.0)
phases = [Phase(120, batch, name="a"), Phase(120, batch, on_enter=theta, name="b")]
res = train_lm(model, phases, OptimCfg(lr=3e-3, warmup_steps=5), out,
               heldout=None, log_every=5, checkpoint_every=10)
save_file({k: v.contiguous() for k, v in model.state_dict().items() if "lm_head" not in k},
          str(out / "final.safetensors"))
print("resumed_from", res.resumed_from)
"""


def run(out: Path, kill_at: int | None = None) -> str:
    env = {**os.environ, "ARCFORGE_PROGRESS": "0"}
    p = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_at is None:
        o, e = p.communicate(timeout=300)
        assert p.returncode == 0, e
        return o
    state = out / "state" / "trainer.json"
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if state.exists():
            try:
                if json.loads(state.read_text())["step"] >= kill_at:
                    break
            except (json.JSONDecodeError, KeyError, FileNotFoundError):
                pass
        time.sleep(0.01)
    assert p.poll() is None, "the run finished before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    return ""


@pytest.mark.slow  # a killed subprocess and two runs (~18 s): make test-all
def test_killed_and_resumed_equals_uninterrupted(tmp_path):
    run(tmp_path / "a")
    run(tmp_path / "b", kill_at=130)  # inside phase b: the RoPE hook must be re-applied
    assert not (tmp_path / "b" / "final.safetensors").exists()
    out = run(tmp_path / "b")
    resumed = int(out.split("resumed_from")[1].split()[0])
    assert 130 <= resumed < 240
    wa = load_file(str(tmp_path / "a" / "final.safetensors"))
    wb = load_file(str(tmp_path / "b" / "final.safetensors"))
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=1e-6, rtol=0)
    steps = [
        json.loads(x)["step"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == sorted(set(steps)) and steps[-1] == 240
