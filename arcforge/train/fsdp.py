"""FSDP2 sharded training: one process per device, launched by torchrun, parameters and
optimizer state split across the ranks.

`trainer: {backend: fsdp2}` makes `train_loop` (arcforge.train.loop) call `shard_for_training`,
which joins the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR in
the environment; gloo on the CPU, nccl on CUDA), builds a 1-D device mesh over the ranks and
applies `torch.distributed.fsdp.fully_shard` to each decoder layer and then to the whole model:
every parameter becomes a DTensor sharded on dim 0, and the AdamW built afterwards holds moments
only for its rank's shard. Forward and backward all-gather a layer's parameters just in time
and reduce-scatter its gradients (averaged over the ranks).

Data parallelism: every rank builds the same global batch (batches are pure functions of the
step) and keeps its contiguous share of the rows (`shard_rows`). Each rank's mean loss is
re-weighted by its share of the trained tokens (`global_mean`), so the averaged gradient is the
gradient of the global token mean and N ranks with B/N rows each step like one process with B
rows; uneven splits (SFT's masked tokens, B not divisible by N) stay exact.

Mixed precision (`mixed_precision: auto`): bf16 parameters and compute with fp32 gradient
reduction on a CUDA device with bf16, fp32 elsewhere (gloo has no bf16 collectives worth using
and CPUs without bf16 units emulate it); the fp32 sharded parameters stay the optimizer's master
copy either way.

Checkpoints: `save_sharded_state` writes each rank's shards of the weights and AdamW moments with
`torch.distributed.checkpoint` (one `.distcp` file per rank plus metadata, which also lets a run
resume on a different number of ranks), each rank's RNG states and `trainer.json`, into a temp
directory renamed into place by rank 0; `load_sharded_state` restores them. `export_hf` gathers
the full state dict on rank 0 and writes one `save_pretrained` directory.

A sharded model computes only through its own forward (the hooks that gather a unit's weights
run there), and never under `torch.inference_mode` (the gathered buffers would become inference
tensors that the next training step cannot write): evaluate with `torch.no_grad`.

Simplifications: one node's ranks share the output directory (a multi-node run needs a shared
filesystem); only AdamW is sharded (Muon orthogonalises whole matrices, which a dim-0 shard is
not); an MTP head is refused (its loss calls the decoder and head directly); every rank
computes held-out losses on the full held-out set.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from pydantic import BaseModel, ConfigDict
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM

from arcforge.device import set_run_device
from arcforge.errors import ConfigError
from arcforge.model.checkpoint import save_checkpoint

if TYPE_CHECKING:  # a stage config may import TrainerCfg from here: no runtime cycle
    from arcforge.config import OptimCfg

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class TrainerCfg(BaseModel):
    """How a stage's weights are updated: `single` (one process, one device) or `fsdp2`
    (one process per device under torchrun, parameters and optimizer state sharded)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    backend: Literal["single", "fsdp2"] = "single"
    # fsdp2's parameter/compute dtype: auto = bf16 on a CUDA device with bf16 (gradients
    # reduced in fp32), fp32 elsewhere; bf16 is refused off CUDA
    mixed_precision: Literal["auto", "bf16", "fp32"] = "auto"
    # free each layer's gathered parameters after its forward (ZeRO-3); False keeps them
    # until the backward (ZeRO-2: more memory, one all-gather fewer per layer)
    reshard_after_forward: bool = True


@dataclass
class Ranks:
    """This process's place in the sharded run."""

    rank: int
    world: int
    local_rank: int
    device: torch.device
    mesh: DeviceMesh

    @property
    def main(self) -> bool:
        return self.rank == 0


_RANKS: Ranks | None = None  # set once per process by `init_distributed`


def launched_by_torchrun() -> bool:
    """True when this process was started by torchrun (its rendezvous variables are set)."""
    return all(v in os.environ for v in TORCHRUN_VARS)


def init_distributed() -> Ranks:
    """Join the process group torchrun set up (once per process) and build the device mesh.

    Each rank computes on cuda:LOCAL_RANK (nccl) when CUDA is visible, else on the CPU (gloo);
    that device becomes the run device, so models opened later land on it. Ranks other than 0
    run without progress bars (one bar per run, not one per rank).
    """
    global _RANKS
    if _RANKS is not None:
        return _RANKS
    if not launched_by_torchrun():
        raise ConfigError(
            "trainer.backend fsdp2 needs one process per rank: launch with "
            "`arcforge run --nproc N ...` or `torchrun --nproc-per-node N ...`"
        )
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local % torch.cuda.device_count())
        set_run_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("dp",))
    if rank != 0:
        os.environ["ARCFORGE_PROGRESS"] = "0"
    _RANKS = Ranks(rank, world, local, device, mesh)
    return _RANKS


def mp_policy(cfg: TrainerCfg, device: torch.device) -> MixedPrecisionPolicy:
    """The mixed-precision policy `cfg.mixed_precision` names on `device` (see module doc)."""
    bf16_ok = device.type == "cuda" and torch.cuda.is_bf16_supported()
    if cfg.mixed_precision == "bf16" and not bf16_ok:
        raise ConfigError(
            f"trainer.mixed_precision bf16 needs a CUDA device with bf16; this rank runs on "
            f"{device}: use mixed_precision: auto or fp32"
        )
    if cfg.mixed_precision == "fp32" or not bf16_ok:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks, each its own FSDP unit (gathered and freed one at a time)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, torch.nn.ModuleList):
        return list(layers)
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def shard_model(model: torch.nn.Module, ranks: Ranks, cfg: TrainerCfg) -> torch.nn.Module:
    """Apply fully_shard to every decoder layer, then to the root (embeddings, tied head, final
    norm); `model` is changed in place (its parameters become DTensors on `ranks.device`)."""
    policy = mp_policy(cfg, ranks.device)
    for layer in decoder_layers(model):
        fully_shard(
            layer,
            mesh=ranks.mesh,
            mp_policy=policy,
            reshard_after_forward=cfg.reshard_after_forward,
        )
    fully_shard(model, mesh=ranks.mesh, mp_policy=policy)
    return model


def shard_for_training(model: torch.nn.Module, cfg: TrainerCfg, optim: OptimCfg) -> Ranks:
    """Join the process group and shard `model` for training with `optim` (checked first:
    only AdamW runs on dim-0 shards)."""
    if optim.name != "adamw":
        raise ConfigError(
            f"trainer.backend fsdp2 trains with optim.name adamw; {optim.name!r} orthogonalises "
            "whole matrices, which a sharded parameter is not"
        )
    if isinstance(getattr(model, "mtp", None), torch.nn.Module):
        raise ConfigError(
            "trainer.backend fsdp2 does not train an MTP head: its loss calls the decoder and "
            "the LM head outside the model's forward, where sharded weights are not gathered"
        )
    ranks = init_distributed()
    if not is_sharded(model):
        shard_model(model, ranks, cfg)
    return ranks


def is_sharded(model: torch.nn.Module) -> bool:
    return isinstance(model, FSDPModule)


# ---- data parallelism ---------------------------------------------------------------------


def shard_rows(batch: Any, rank: int, world: int) -> Any:
    """This rank's contiguous share of the rows of every tensor in `batch` (a tensor or a
    tuple/list/dict of them, split on dim 0 as `torch.tensor_split` does: the first B % N
    ranks get one row more). Raises ConfigError when a rank would get no row."""
    if isinstance(batch, torch.Tensor):
        if batch.size(0) < world:
            raise ConfigError(
                f"a batch of {batch.size(0)} rows cannot be split over {world} ranks: "
                "raise the stage's batch size to at least the number of processes"
            )
        return torch.tensor_split(batch, world)[rank]
    if isinstance(batch, (tuple, list)):
        return type(batch)(shard_rows(b, rank, world) for b in batch)
    if isinstance(batch, dict):
        return {k: shard_rows(v, rank, world) for k, v in batch.items()}
    return batch


def global_mean(loss: torch.Tensor, n_tok: int) -> tuple[torch.Tensor, float, int]:
    """Turn this rank's mean loss over `n_tok` tokens into the global token mean.

    FSDP averages gradients over the W ranks, so the backward of
        loss_r * n_r * W / N      (N = sum of n_r over ranks)
    on every rank gives the gradient of sum_r n_r loss_r / N, the mean over all N tokens.

    Returns:
        (the loss to backward, the global mean loss as a float, N).
    """
    world = dist.get_world_size()
    both = torch.tensor([float(n_tok), loss.detach().float().item() * n_tok], dtype=torch.float64)
    dist.all_reduce(both)  # [N, sum of n_r * loss_r]
    n_all = int(both[0].item())
    scaled = loss * (n_tok * world / max(1, n_all))
    return scaled, float(both[1].item()) / max(1, n_all), n_all


def grad_norm_value(gnorm: torch.Tensor) -> float:
    """clip_grad_norm_'s total norm as a float (a DTensor over sharded gradients)."""
    full = getattr(gnorm, "full_tensor", None)
    return float(full() if callable(full) else gnorm)


# ---- sharded checkpoints -------------------------------------------------------------------


def _rng_state() -> dict[str, Any]:
    return {
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
        "numpy_rng": np.random.get_state(),
        "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_initialized() else None,
    }


def _set_rng_state(blob: dict[str, Any]) -> None:
    torch.set_rng_state(blob["torch_rng"])
    if blob.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(blob["cuda_rng"])
    random.setstate(blob["python_rng"])
    np.random.set_state(blob["numpy_rng"])


def swap_into_place(tmp: Path, state_dir: Path) -> None:
    """Move the finished `tmp` directory to `state_dir`: an existing state is renamed to
    `<state_dir>.old` first (what `arcforge.train.resume.find_state` falls back to when the
    process dies between the two renames) and removed once `tmp` is in place."""
    old = state_dir.with_name(state_dir.name + ".old")
    if state_dir.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(state_dir, old)
    os.replace(tmp, state_dir)
    shutil.rmtree(old, ignore_errors=True)


def save_sharded_state(
    state_dir: Path,
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    step: int,
    extra: dict[str, Any] | None = None,
) -> None:
    """Collective: every rank writes its shards of model + optimizer (DCP), its RNG states;
    rank 0 writes trainer.json and renames the temp dir into place (the layout
    `arcforge.train.resume.find_state` looks for)."""
    ranks = init_distributed()
    tmp = state_dir.with_name(state_dir.name + ".tmp")
    if ranks.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp / "dcp"))
    torch.save(_rng_state(), tmp / f"rng_rank{ranks.rank}.pt")
    dist.barrier()
    if ranks.main:
        meta = {"step": step, "backend": "fsdp2", "world_size": ranks.world, **(extra or {})}
        (tmp / "trainer.json").write_text(json.dumps(meta))
        swap_into_place(tmp, state_dir)
    dist.barrier()


def load_sharded_state(
    state_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer
) -> dict[str, Any]:
    """Collective: restore what `save_sharded_state` wrote (on any number of ranks: DCP
    reshards); returns the trainer.json dict (with "step")."""
    ranks = init_distributed()
    if not (state_dir / "dcp").is_dir():
        raise ConfigError(
            f"{state_dir} was written by trainer.backend single; resume it with that backend "
            "or remove it to start over"
        )
    model_sd, optim_sd = get_state_dict(model, opt)
    both = {"model": model_sd, "optim": optim_sd}
    dcp.load(both, checkpoint_id=str(state_dir / "dcp"))
    set_state_dict(model, opt, model_state_dict=both["model"], optim_state_dict=both["optim"])
    rng = state_dir / f"rng_rank{ranks.rank}.pt"
    if rng.exists():  # a rank added since the save keeps its own seed
        _set_rng_state(torch.load(rng, weights_only=False))
    return json.loads((state_dir / "trainer.json").read_text())


# ---- export --------------------------------------------------------------------------------


def export_hf(
    model: torch.nn.Module,
    tokenizer: Any,
    out_dir: str | Path,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write `model` as one save_pretrained directory (arcforge.model.checkpoint).

    A sharded model's full state dict is gathered to rank 0's CPU, loaded into an unsharded
    copy of the architecture and saved there; the other ranks wait until the directory
    exists. An unsharded model is saved as it is.
    """
    if not is_sharded(model):
        return save_checkpoint(model, tokenizer, out_dir, extra)
    ranks = init_distributed()
    full = get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    if ranks.main:
        with torch.random.fork_rng(devices=[]):
            plain = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
        plain.load_state_dict(full)
        plain.generation_config = model.generation_config
        save_checkpoint(plain, tokenizer, out_dir, extra)
    dist.barrier()
    return Path(out_dir)
