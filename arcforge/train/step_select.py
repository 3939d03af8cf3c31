"""Which weights an RL stage ends on: weight averaging, dev-set probing and step selection.

RL on a tiny model moves held-out suites up in one run and down in the next (two runs of one
config can differ by 0.2 on TIR), so a stage that may only be kept when it helped measures that
on items it neither trains nor reports on. Three pieces the asynchronous trainer
(arcforge.train.async_rl) calls around its step:

    average   `WeightEMA` (`weight_ema: d`): a Polyak average of the weights, avg <- d avg +
              (1 - d) w after every step from the stage's first weights; the engines keep
              sampling from the online weights, while the probe, the kept best and the stage's
              checkpoint take the average (its state is saved and resumed with the rest)
    probe     `StepProbe` (`probe:`): greedy episodes on dev tasks (neither train nor test) at
              step 0, every `probe.every` steps and at the end, logged to probe.jsonl with each
              item's score; the best probed weights are kept on disk by `BestKeeper`
    select    `kept_probe` picks the probed step the stage ends on (`probe.keep`)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Protocol

import torch
from safetensors.torch import load_file, save_file

from arcforge.metrics import JsonlSink
from arcforge.stats import mean_ci

Probe = Callable[[torch.nn.Module], dict[str, list[float]]]  # model -> dev suite -> item scores


class ProbeSettings(Protocol):
    """What the trainer reads of a probe config (the agentic RL stage's ProbeCfg)."""

    every: int  # steps between probes (also at step 0 and the last step)
    keep: str  # which probed weights the stage ends on (kept_probe)


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of `model`'s state dict."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def best_probe(rows: list[dict]) -> dict | None:
    """The probe.jsonl row with the best mean, the earliest of equal ones (BestKeeper's rule)."""
    return max(rows, key=lambda r: (r["mean"], -r["step"]), default=None)


def probe_items(row: dict) -> list[float] | None:
    """A probe.jsonl row's item scores, suite after suite (None: a row written without them)."""
    suites = sorted(k for k in row if k.startswith("items_"))
    return [x for k in suites for x in row[k]] if suites else None


def kept_probe(rows: list[dict], keep: str) -> dict | None:
    """The probe.jsonl row whose weights a stage with `probe.keep = keep` ends on.

    "best" takes the best mean (the earliest of equal ones): an argmax over noisy dev scores,
    which favours whichever step the noise lifted. "last_unless_worse" takes the last probed
    step unless its paired change from the best one (item by item, the same dev tasks) lies
    below zero beyond its 95% interval: a guard against a run that fell, not a search for the
    luckiest step. In a 90-step run with dev TIR 0.71, 0.74, 0.74, 0.70 at steps 0-90, "best"
    kept step 30 (held out +0.043, within its interval) where step 90's weights scored +0.087,
    beyond it; a run with dev TIR 0.71, 0.73, 0.71, 0.55 is the case the guard is for: its
    step 90 lost 0.037 held out (docs/experiments.md, "Probe and step selection")."""
    if not rows:
        return None
    best, last = best_probe(rows), max(rows, key=lambda r: r["step"])
    if keep == "best":
        return best
    if keep == "last" or best is last:
        return last
    a, b = probe_items(last), probe_items(best)
    if a is None or b is None or len(a) != len(b):
        return best  # no paired items to test the fall on: the best mean
    _, _, hi = mean_ci([x - y for x, y in zip(a, b)])
    return best if hi < 0 else last


class BestKeeper:
    """The probed step with the best mean score and its weights, in probe/best-<step>.safetensors.

    A new best's file is written before the trainer state that names it, and older files are
    removed only after that state is saved, so a resumed run always finds the file its state
    names (files of a step the resumed state never saw are removed on resume)."""

    def __init__(self, out_dir: Path, state: dict | None):
        self.dir = out_dir / "probe"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.step, self.score = (state or {}).get("step", -1), (state or {}).get("score", -1.0)
        self.prune()

    def path(self, step: int) -> Path:
        return self.dir / f"best-{step}.safetensors"

    def offer(self, model: torch.nn.Module, step: int, score: float) -> bool:
        """Keep `model`'s weights when `score` beats the best so far (ties keep the earlier)."""
        if score <= self.score:
            return False
        self._save(model, self.path(step))
        self.step, self.score = step, score
        return True

    def keep_last(self, model: torch.nn.Module, step: int) -> None:
        """Set the last step's weights aside (probe/last-<step>) before an earlier best wins."""
        self._save(model, self.dir / f"last-{step}.safetensors")

    @staticmethod
    def _save(model: torch.nn.Module, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        save_file({k: v.contiguous() for k, v in weights(model).items()}, str(tmp))
        tmp.replace(path)

    def state(self) -> dict:
        return {"step": self.step, "score": self.score}

    def prune(self) -> None:
        for f in self.dir.glob("best-*"):
            if f.name != self.path(self.step).name:
                f.unlink()

    def restore(self, model: torch.nn.Module) -> None:
        model.load_state_dict(load_file(str(self.path(self.step))))


class WeightEMA:
    """A Polyak (exponential moving) average of the trainer's weights:

        avg_0 = w_0,   avg_t = d · avg_(t-1) + (1 − d) · w_t        (after every trainer step)

    The episodes must come from the policy being trained, so the engines keep the online
    weights w_t; what the stage evaluates and ends on is the average. On the tiny demo model
    one step moves greedy dev TIR by up to 0.2 (0.68, 0.45, 0.67, 0.72, 0.52 at steps 0-24 in
    one run) where the sampled reward rises slowly; averaging the iterates keeps the direction
    they share and damps the step-to-step noise (tail averaging of SGD, as in SWA /
    EMA-of-weights). Measured once at d 0.9: a smoother dev curve, no held-out gain over the
    last iterate; hence off by default (docs/experiments.md, "Weight EMA")."""

    def __init__(
        self, model: torch.nn.Module, decay: float, saved: dict[str, torch.Tensor] | None = None
    ) -> None:
        self.decay = decay
        self.avg = weights(model) if saved is None else saved

    def update(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if v.is_floating_point():
                    self.avg[k].lerp_(v, 1.0 - self.decay)
                else:
                    self.avg[k].copy_(v)

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """The model holds the average inside the block and its online weights after it."""
        online = weights(model)
        model.load_state_dict(self.avg)
        try:
            yield
        finally:
            model.load_state_dict(online)


class StepProbe:
    """Dev-set probes of a training run, the best probed weights, and the step it ends on.

    Args:
        probe: scores a model on the dev tasks (suite -> item scores).
        settings: `every` (steps between probes) and `keep` (the rule of `kept_probe`).
        out_dir: the stage directory (probe.jsonl and probe/ go there).
        steps: the run's step count (the last step is always probed).
        resume_step: the step a resumed run restarts at (None: a fresh run).
        best_state: the BestKeeper state the resumed trainer state names (None: fresh).
        ema: with a weight average, the probe scores the average (what the stage ends on).
    """

    def __init__(
        self,
        probe: Probe,
        settings: ProbeSettings,
        out_dir: Path,
        steps: int,
        resume_step: int | None = None,
        best_state: dict | None = None,
        ema: WeightEMA | None = None,
    ) -> None:
        self.probe, self.settings, self.steps, self.ema = probe, settings, steps, ema
        self.log = JsonlSink(out_dir / "probe.jsonl", resume_step=resume_step)
        self.best = BestKeeper(out_dir, best_state)

    def due(self, done: int) -> bool:
        """Whether the run probes after `done` steps."""
        return done % self.settings.every == 0 or done == self.steps

    def run(self, model: torch.nn.Module, done: int) -> None:
        """Probe `model` (its average, with an EMA), log the row and offer it to the keeper."""
        t0 = time.monotonic()
        with self.ema.applied(model) if self.ema else nullcontext():  # what the stage ends on
            items = self.probe(model)
            scores = {k: sum(v) / max(1, len(v)) for k, v in items.items()}
            mean_score = round(sum(scores.values()) / len(scores), 9)  # equal means tie
            new = self.best.offer(model, done, mean_score)
        self.log.log(
            done,
            {
                "mean": mean_score,
                "best": new,
                "probe_s": time.monotonic() - t0,
                **{f"probe_{k}": v for k, v in scores.items()},
                **{f"items_{k}": v for k, v in items.items()},
            },
        )
        print(
            f"[probe] step {done}: "
            + " ".join(f"{k}={v:.3f}" for k, v in scores.items())
            + f" mean={mean_score:.3f}"
            + (" (best)" if new else "")
        )

    def state(self) -> dict:
        """What the trainer state keeps of the probe (the best step, named by its file)."""
        return {"best": self.best.state()}

    def saved(self) -> None:
        """The trainer state naming the best file is written: the other files can go."""
        self.best.prune()

    def select(self, model: torch.nn.Module) -> None:
        """At the end of the run, load the weights of the probed step `keep` picks (the last
        step's weights are set aside in probe/last-<step> when an earlier one wins)."""
        if self.settings.keep == "last" or self.best.step < 0:
            return
        kept = kept_probe(self.log.rows(), self.settings.keep)
        if kept is not None and kept["step"] == self.best.step != self.steps:
            self.best.keep_last(model, self.steps)
            self.best.restore(model)  # the weights of the best probed step
