"""FSDP2 on 2 CPU ranks (gloo) against one process: the same weights after the same steps,
exact resume after a rank is killed, and an HF export equal to the trained weights.

The ranks are forked from a forkserver that imported torch and arcforge once (a torchrun launch
re-imports them in every rank, ~10 s each on the 2-core dev machine); each rank gets torchrun's
environment variables, so `arcforge.train.fsdp.init_distributed` runs as under torchrun. The
batches are SFT-shaped (right-padded, random loss masks) with 5 rows: the ranks get 3 and 2 rows
and different numbers of trained tokens, the case where averaging per-rank means would be wrong.
The run has two phases (the second changes the RoPE base on entry, re-applied on resume) and a
held-out loss every 4 steps (an evaluation between training steps of the sharded model).
"""

import json
import os
import signal
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

from arcforge.config import OptimCfg
from arcforge.errors import ConfigError
from arcforge.model.checkpoint import init_model, set_rope_theta
from arcforge.model.presets import build_config
from arcforge.train.fsdp import (
    TrainerCfg,
    export_hf,
    init_distributed,
    shard_for_training,
    shard_rows,
)
from arcforge.train.lm import heldout_loss
from arcforge.train.loop import Phase, train_loop
from arcforge.train.sft import sft_loss

pytestmark = pytest.mark.distributed

STEPS, ROWS, T, VOCAB = 8, 5, 16, 97
PRELOAD = ["torch", "transformers", "arcforge.train.loop", "arcforge.train.sft"]


def _batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A pure function of the step: (input ids (B, T), targets (B, T), -100 where masked)."""
    g = torch.Generator().manual_seed(step)
    x = torch.randint(0, VOCAB, (ROWS, T), generator=g)  # (B, T)
    y = torch.randint(0, VOCAB, (ROWS, T), generator=g)  # (B, T)
    keep = torch.rand(ROWS, T, generator=g) < 0.6  # uneven trained tokens per row
    return x, torch.where(keep, y, torch.full_like(y, -100))


def _train(out: Path, backend: str, kill_at: int | None = None) -> None:
    """Train the nano preset for STEPS steps (state every 3), export it to out/hf, and save the
    weights as trained (gathered from the shards) to out/trained.safetensors."""
    held = torch.randint(0, VOCAB, (4, T + 1), generator=torch.Generator().manual_seed(-1))

    def batch(step: int):
        if kill_at is not None and step == kill_at and int(os.environ.get("RANK", 0)) == 0:
            os.kill(os.getpid(), signal.SIGKILL)  # a crash mid-run, after the state at step 6
        return _batch(step)

    model = init_model(build_config("nano", vocab_size=VOCAB, max_position_embeddings=64), 0)
    half = STEPS // 2
    phases = [
        Phase(half, batch, name="a"),
        Phase(half, lambda s: batch(s + half), lambda m: set_rope_theta(m, 5e4), name="b"),
    ]
    train_loop(
        model,
        phases,
        sft_loss,
        OptimCfg(lr=3e-3, warmup_steps=2),
        out,
        log_every=1,
        checkpoint_every=3,
        heldout_fn=lambda m: heldout_loss(m, held),
        heldout_every=4,
        trainer=TrainerCfg(backend=backend),
    )
    trained = {}
    for name, p in model.named_parameters():  # gathered here independently of export_hf
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        trained[name] = full.detach().clone()
    if int(os.environ.get("RANK", 0)) == 0:
        save_file(trained, str(out / "trained.safetensors"))
    export_hf(model, None, out / "hf")


def _rank(rank: int, world: int, port: int, out: str, backend: str, kill_at: int | None) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        ARCFORGE_PROGRESS="0",
    )
    torch.set_num_threads(1)
    _train(Path(out), backend, kill_at)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, world: int = 2, kill_at: int | None = None) -> None:
    """Run `_train` on `world` ranks (1: the single-process backend, also one thread, in a
    process of its own); raises ProcessExitedException when a rank dies (the others are then
    terminated, as torchrun does)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    backend = "fsdp2" if world > 1 else "single"
    args = (world, _free_port(), str(out), backend, kill_at)
    mp.start_processes(_rank, args=args, nprocs=world, start_method="forkserver")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One uninterrupted single-process run and one uninterrupted 2-rank run."""
    root = tmp_path_factory.mktemp("fsdp2")
    _launch(root / "single", world=1)
    _launch(root / "sharded")
    return {"single": root / "single", "sharded": root / "sharded"}


def _metrics(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


def test_two_ranks_equal_one_process(runs):
    single = load_file(str(runs["single"] / "hf" / "model.safetensors"))
    sharded = load_file(str(runs["sharded"] / "hf" / "model.safetensors"))
    assert sorted(single) == sorted(sharded)
    init = init_model(build_config("nano", vocab_size=VOCAB, max_position_embeddings=64), 0)
    moved = max((single[k] - init.state_dict()[k]).abs().max().item() for k in single)
    assert moved > 1e-3  # the steps changed the weights, so equality says something
    for k in single:
        torch.testing.assert_close(sharded[k], single[k], atol=1e-5, rtol=0)
    # the logged loss is the global token mean, as the single process logs it
    rows, ref = _metrics(runs["sharded"]), _metrics(runs["single"])
    assert [r["step"] for r in rows if "loss" in r] == list(range(1, STEPS + 1))
    assert [r["step"] for r in rows if "heldout_loss" in r] == [0, 4, 8]
    assert len(rows) == len(ref)
    for a, b in zip(rows, ref):
        for key in ("loss", "heldout_loss"):
            assert a.get(key, 0) == pytest.approx(b.get(key, 0), abs=1e-5)
        assert a.get("grad_norm", 0) == pytest.approx(b.get("grad_norm", 0), rel=1e-4)


def test_export_loads_in_transformers_and_equals_trained(runs):
    trained = load_file(str(runs["sharded"] / "trained.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(str(runs["sharded"] / "hf"))
    params = dict(model.named_parameters())
    assert sorted(params) == sorted(trained)
    for k, v in trained.items():
        torch.testing.assert_close(params[k].detach(), v, atol=0, rtol=0)
    # the state is sharded: one DCP file per rank, one RNG state per rank
    state = runs["sharded"] / "state"
    assert sorted(p.name for p in (state / "dcp").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    assert json.loads((state / "trainer.json").read_text())["world_size"] == 2


def test_killed_and_resumed_equals_uninterrupted(runs, tmp_path):
    out = tmp_path / "resumed"
    with pytest.raises(mp.ProcessExitedException):
        _launch(out, kill_at=7)  # rank 0 dies fetching step 7's batch; the state is at 6
    assert json.loads((out / "state" / "trainer.json").read_text())["step"] == 6
    assert not (out / "hf").exists()
    _launch(out)
    resumed = load_file(str(out / "hf" / "model.safetensors"))
    whole = load_file(str(runs["sharded"] / "hf" / "model.safetensors"))
    for k in whole:
        torch.testing.assert_close(resumed[k], whole[k], atol=1e-6, rtol=0)
    steps = [r["step"] for r in _metrics(out) if "loss" in r]
    assert steps == list(range(1, STEPS + 1))  # no step logged twice


def test_shard_rows_splits_every_tensor_by_rank():
    x = torch.arange(10).view(5, 2)  # (B=5, 2)
    parts = [shard_rows((x, {"y": x + 100}), r, 2) for r in range(2)]
    assert parts[0][0].tolist() == [[0, 1], [2, 3], [4, 5]]  # tensor_split: 3 rows, then 2
    assert parts[1][1]["y"].tolist() == [[106, 107], [108, 109]]
    with pytest.raises(ConfigError, match="5 rows cannot be split over 8 ranks"):
        shard_rows(x, 0, 8)


def test_fsdp2_refuses_muon_and_a_launch_without_torchrun(monkeypatch):
    model = init_model(build_config("nano", vocab_size=VOCAB, max_position_embeddings=64), 0)
    with pytest.raises(ConfigError, match="adamw"):
        shard_for_training(model, TrainerCfg(backend="fsdp2"), OptimCfg(name="muon"))
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="--nproc"):
        init_distributed()
