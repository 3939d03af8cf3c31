"""The resumable state the RL-type trainers share: find the latest, reload it, save it.

A trainer opens `TrainerState(out_dir, model, opt)` once before its loop. It finds the latest
complete state under `out_dir` (`state/`, or `state.old/` after a crash between the two renames
of an atomic write), restores the weights, optimizer moments and RNG states from it, and tells
where the loop restarts (`step`) and what the trainer stored with it (`info`: a prompt cursor,
an engine version, the orchestrator's state, ...). `metrics_resume_step` is what a metric sink
needs to drop the rows logged past that step, so a resumed run never logs a step twice.

Saving goes through the supervised loop's `save_state` (arcforge.train.loop): model, optimizer,
step, RNG and the trainer's extra state and tensors, written to a temporary directory and
renamed into place. The learning rate is a pure function of the step (`lr_at`), so there is no
scheduler state to keep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from arcforge.train.loop import checkpoint_if_due, find_state, load_state, save_state
from arcforge.train.optim import Optimizer

Tensors = dict[str, dict[str, torch.Tensor]]  # name -> <name>.safetensors of the state


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
