"""Resumable training state: save it, reload it, find the latest one.

`save_state` writes what a run needs to continue exactly where it stopped: the model weights,
the optimizer moments, the step, the torch / Python / NumPy / CUDA RNG states, whatever the
trainer adds (`extra`: a prompt cursor, an engine version, the orchestrator's state, ...) and
named tensors (e.g. a weight average). It writes to a temporary directory and renames it into
place (`swap_into_place`), so a crash leaves either the old state or the new one: `find_state`
returns `state/`, or `state.old/` when the crash fell between the two renames. A sharded
(FSDP2) model is saved and loaded with torch.distributed.checkpoint instead
(arcforge.train.fsdp). The learning rate is a pure function of the step
(arcforge.train.optim.lr_at), so there is no scheduler state to keep.

The supervised loop (arcforge.train.loop) and the RL-type trainers open a
`TrainerState(out_dir, model, opt)` once before their loop: it finds and reloads the latest
state, tells where the loop restarts (`step`) and what the trainer stored with it (`info`).
`metrics_resume_step` is what a metric sink needs to drop the rows logged past that step, so a
resumed run never logs a step twice.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from arcforge.errors import ConfigError
from arcforge.train.fsdp import is_sharded, load_sharded_state, save_sharded_state, swap_into_place
from arcforge.train.optim import Optimizer

Tensors = dict[str, dict[str, torch.Tensor]]  # name -> <name>.safetensors of the state


def save_state(
    state_dir: Path,
    model: torch.nn.Module,
    opt: Optimizer,
    step: int,
    extra: dict[str, Any] | None = None,
    tensors: Tensors | None = None,
) -> None:
    """Write model, optimizer, step and RNG states, and each of `tensors` as
    <name>.safetensors (e.g. an average of the weights); atomic via a temp dir + rename.
    A sharded (FSDP2) model is saved with torch.distributed.checkpoint, collectively."""
    if is_sharded(model):
        if tensors:
            raise ValueError("extra tensors are not saved for a sharded model")
        save_sharded_state(state_dir, model, opt, step, extra)  # type: ignore[arg-type]
        return
    tmp = state_dir.with_name(state_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weights = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(weights, str(tmp / "model.safetensors"))  # clones: tied weights are separate
    for name, named in (tensors or {}).items():
        save_file(
            {k: v.detach().contiguous() for k, v in named.items()}, str(tmp / f"{name}.safetensors")
        )
    torch.save(
        {
            "optimizer": opt.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
        },
        tmp / "trainer.pt",
    )
    (tmp / "trainer.json").write_text(json.dumps({"step": step, **(extra or {})}))
    swap_into_place(tmp, state_dir)


def load_state(state_dir: Path, model: torch.nn.Module, opt: Optimizer) -> dict:
    """Restore what `save_state` wrote; returns the trainer.json dict (with "step")."""
    if is_sharded(model):
        return load_sharded_state(state_dir, model, opt)  # type: ignore[arg-type]
    if (state_dir / "dcp").is_dir():
        raise ConfigError(
            f"{state_dir} was written by trainer.backend fsdp2; resume it with that backend "
            "(arcforge run --nproc N) or remove it to start over"
        )
    weights = load_file(str(state_dir / "model.safetensors"))
    model.load_state_dict(weights, strict=False)
    # on the CPU first: a state written on a GPU resumes on the CPU and the other way round
    # (load_state_dict moves the moments to the parameters' device)
    blob = torch.load(state_dir / "trainer.pt", weights_only=False, map_location="cpu")
    opt.load_state_dict(blob["optimizer"])
    torch.set_rng_state(blob["torch_rng"])
    cuda_rng = blob.get("cuda_rng")
    if cuda_rng and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_rng)
    random.setstate(blob["python_rng"])
    np.random.set_state(blob["numpy_rng"])
    return json.loads((state_dir / "trainer.json").read_text())


def checkpoint_if_due(
    state_dir: Path,
    model: torch.nn.Module,
    opt: Optimizer,
    done: int,
    total: int,
    every: int,
    stop_after: int | None = None,
    extra: dict[str, Any] | None = None,
    tensors: Tensors | None = None,
) -> bool:
    """Save the resumable state every `every` steps (not after the last one: the stage's
    checkpoint follows) or when stopping early at `stop_after`; True when the loop must stop."""
    stop = stop_after is not None and done >= stop_after
    if (done % every == 0 and done < total) or stop:
        save_state(state_dir, model, opt, done, extra, tensors)
    return stop


def find_state(out_dir: Path) -> Path | None:
    """The resumable state dir, recovering from a crash between the two renames."""
    state, old = out_dir / "state", out_dir / "state.old"
    if (state / "trainer.json").exists():
        return state
    if (old / "trainer.json").exists():
        return old
    return None


class TrainerState:
    """A trainer's resumable state under `out_dir/state`, reloaded on construction.

    Args:
        out_dir: the stage directory.
        model, opt: restored in place from the latest state when there is one.
    Attributes:
        resumed: whether a state was found and loaded.
        step: the step the loop restarts at (0 for a fresh run).
        info: what the trainer saved as `extra` ({} for a fresh run).
    """

    def __init__(self, out_dir: Path, model: torch.nn.Module, opt: Optimizer) -> None:
        self.out_dir, self.model, self.opt = out_dir, model, opt
        self.found = find_state(out_dir)
        self.info: dict[str, Any] = load_state(self.found, model, opt) if self.found else {}
        self.resumed = self.found is not None
        self.step: int = self.info.get("step", 0)

    @property
    def metrics_resume_step(self) -> int | None:
        """The `resume_step` of the run's metric logs: None (start afresh) or the step."""
        return self.step if self.resumed else None

    def tensors(self, name: str) -> dict[str, torch.Tensor] | None:
        """The saved tensors `name` (`save(..., tensors={name: ...})`), None if absent."""
        path = self.found / f"{name}.safetensors" if self.found else None
        return load_file(str(path)) if path and path.exists() else None

    def save(
        self, step: int, extra: dict[str, Any] | None = None, tensors: Tensors | None = None
    ) -> None:
        """Write the state after `step` steps, atomically."""
        save_state(self.out_dir / "state", self.model, self.opt, step, extra, tensors)

    def checkpoint_if_due(
        self,
        done: int,
        total: int,
        every: int,
        stop_after: int | None = None,
        extra: dict[str, Any] | None = None,
        tensors: Tensors | None = None,
    ) -> bool:
        """Save every `every` steps (not after the last: the stage's checkpoint follows) or when
        stopping early at `stop_after`; True when the loop must stop."""
        state_dir = self.out_dir / "state"
        return checkpoint_if_due(
            state_dir, self.model, self.opt, done, total, every, stop_after, extra, tensors
        )
