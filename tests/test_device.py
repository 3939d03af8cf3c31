"""`device:` in a run config: resolution with clear errors, the run-wide placement of models, and
`to_device` over the nested batches the trainers build (checked on PyTorch's `meta` device,
which every build has, so the moves are real even without a GPU). The GPU side of the same
contract is tests/test_device_gpu.py."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

import arcforge.device as device
from arcforge.device import model_device, resolve_device, run_device, set_run_device, to_device
from arcforge.errors import ConfigError
from arcforge.model.checkpoint import init_model, load_model, save_checkpoint
from arcforge.model.presets import build_config
from arcforge.pipeline import RunContext
from arcforge.run_config import RunCfg
from arcforge.train.rollout_batch import TokenBatch

META = torch.device("meta")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU errors")


@pytest.fixture(autouse=True)
def _restore_run_device():
    before = run_device()
    yield
    device._RUN_DEVICE = before


def test_cpu_and_auto_resolve_without_a_gpu():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    want = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
    assert resolve_device("auto") == want


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_asking_for_a_missing_gpu_names_the_problem(name):
    with pytest.raises(ConfigError, match="sees no CUDA GPU"):
        resolve_device(name)


@pytest.mark.parametrize("name", ["tpu", "gpu0", "cuda:x", "meta"])
def test_a_malformed_device_is_a_config_error(name):
    with pytest.raises(ConfigError, match="device"):
        resolve_device(name)


@no_cuda
def test_a_run_config_asking_for_cuda_fails_before_any_stage(tmp_path):
    cfg = RunCfg.model_validate({"name": "x", "device": "cuda"})
    with pytest.raises(ConfigError, match="device: 'cuda'"):
        RunContext(cfg, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing was built


def test_to_device_moves_every_tensor_and_keeps_the_structure():
    Pair = namedtuple("Pair", "x y")
    b = TokenBatch(
        torch.zeros(2, 3, dtype=torch.long),
        torch.ones(2, 3, dtype=torch.long),
        torch.ones(2, 3),
        torch.zeros(2, 3),
        torch.zeros(2),
    )
    obj = {"batch": b, "pair": Pair(torch.ones(1), 3), "list": [torch.zeros(2), "s"], "n": 5}
    out = to_device(obj, META)
    assert out["batch"].input_ids.device == META and out["batch"].mask.device == META
    assert out["batch"].logp_old is None  # optional fields stay unset
    assert b.input_ids.device.type == "cpu"  # the original is untouched
    assert isinstance(out["pair"], Pair) and out["pair"].x.device == META and out["pair"].y == 3
    assert out["list"][0].device == META and out["list"][1] == "s" and out["n"] == 5
    assert out["batch"].input_ids.dtype == torch.long and out["batch"].input_ids.shape == (2, 3)


def test_models_a_run_opens_go_to_the_run_device(tmp_path, tok):
    conf = build_config("nano", vocab_size=len(tok), max_position_embeddings=32)
    save_checkpoint(init_model(conf, seed=0), tok, tmp_path / "ck")
    assert model_device(load_model(tmp_path / "ck")).type == "cpu"
    set_run_device(META)
    assert model_device(load_model(tmp_path / "ck")) == META
    assert model_device(load_model(tmp_path / "ck", device=torch.device("cpu"))).type == "cpu"
