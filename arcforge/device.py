"""Where the run's models compute: the run config's `device:` (cpu, cuda, cuda:N, mps or auto).

One rule keeps the rest of the code device-agnostic: models live on the run device, data is
built on the CPU (token lists, padded batches, rewards, advantages), and each forward moves its
own inputs to the model's device with `to_device` and hands results back on the device the data
came from. On a CPU run every move is a no-op.

`set_run_device` is called once by the pipeline (and by `arcforge eval`); `load_model` and the
stages' fresh models are placed on `run_device()`. A process-wide default rather than a
parameter on every loader because every model a run opens (the stage's policy, distillation
teachers, the reward model, the served synthesis model, the evaluated checkpoint) belongs on
the same device, and threading a device through each of those call chains would touch dozens
of signatures for one value.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import torch

from arcforge.errors import ConfigError

T = TypeVar("T")

_RUN_DEVICE = torch.device("cpu")


def resolve_device(name: str) -> torch.device:
    """`name` as a torch.device: "auto" is the first CUDA GPU when one is visible, else the CPU.

    Raises ConfigError naming the problem when the device is malformed or not present."""
    name = (name or "cpu").strip().lower()
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(
            f"device: {name!r} is not a device; use cpu, cuda, cuda:N, mps or auto"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device: {name!r} but this PyTorch sees no CUDA GPU "
                f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                "use device: cpu or auto"
            )
        index = dev.index or 0
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"device: {name!r} but only {torch.cuda.device_count()} CUDA GPU(s) are visible"
            )
        return torch.device("cuda", index)
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device: 'mps' but this PyTorch has no Metal (MPS) support")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device: {name!r} is not supported; use cpu, cuda, cuda:N, mps or auto")
    return dev


def set_run_device(name: str | torch.device) -> torch.device:
    """Make `name` the device new models are placed on; returns the resolved device."""
    global _RUN_DEVICE
    _RUN_DEVICE = name if isinstance(name, torch.device) else resolve_device(name)
    if _RUN_DEVICE.type == "cuda":
        torch.cuda.set_device(_RUN_DEVICE)
    return _RUN_DEVICE


def run_device() -> torch.device:
    """The device new models go to (the CPU unless `set_run_device` said otherwise)."""
    return _RUN_DEVICE


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of `model`'s parameters."""
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def to_device(obj: T, device: torch.device) -> T:
    """`obj` with every tensor inside moved to `device`: tensors, tuples, lists, dicts and
    dataclasses (a new instance; the original is untouched). Anything else is returned as is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=device.type == "cuda")  # type: ignore[return-value]
    if isinstance(obj, tuple):
        items = [to_device(x, device) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)  # type: ignore
    if isinstance(obj, list):
        return [to_device(x, device) for x in obj]  # type: ignore[return-value]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}  # type: ignore[return-value]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: to_device(getattr(obj, f.name), device) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj
