"""`arcforge synth check-task`: is a task's verifier trustworthy enough to train on?

Three checks, each through the task's own environment in the sandbox:
- stability: the oracle solution passes in every one of `runs` fresh episodes, and the empty
  solution (no action at all) fails in every one;
- exploits: no probe of synth/probes.py fools the verifier.
The verdict, printed as JSON by the CLI:

    {"task": id, "oracle": <oracle passed every run>, "empty": <empty solution passed any run>,
     "stability": {"oracle_passes": k, "empty_fails": k, "runs": n},
     "probes": {NAME: <fooled>}, "not_applicable": [NAME, ...],
     "accepted": bool, "reasons": ["probe conftest fooled the verifier: ...", ...]}

accepted iff the oracle passes n/n, the empty solution fails n/n and no probe fools it.
A task the importers mark unsupported here (metadata["unsupported"]) is not accepted and
names why, without running anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arcforge.envs.check import check_task, load_task
from arcforge.synth.probes import PASS_THRESHOLD, PROBES, ProbeContext, oracle_outputs, run_probes
from arcforge.types import Task


def check_task_exploits(
    task_or_path: Task | str | Path,
    runs: int = 3,
    backend: str = "bwrap",
    probes: Iterable[str] | None = None,
    repos: Iterable[Any] = (),
) -> dict[str, Any]:
    """Stability and exploit checks of one task (see the module docstring).

    Args:
        task_or_path: a Task, or a task directory / JSON(L) file `load_task` understands.
        runs: fresh episodes for the oracle and for the empty solution each.
        backend: sandbox backend.
        probes: probe names to run (default: all).
        repos: the world's repos, for world SWE tasks.
    Raises:
        ValueError: a task that cannot be loaded, has no oracle, or is not terminal/swe.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    task = task_or_path if isinstance(task_or_path, Task) else load_task(task_or_path)
    if task.kind not in ("terminal", "swe"):
        raise ValueError(f"check-task supports terminal and swe tasks, not {task.kind!r}")
    names = list(probes) if probes is not None else list(PROBES)
    out: dict[str, Any] = {
        "task": task.id,
        "oracle": False,
        "empty": False,
        "stability": {"oracle_passes": 0, "empty_fails": 0, "runs": runs},
        "probes": {n: False for n in names},
        "not_applicable": [],
        "accepted": False,
        "reasons": [],
    }
    if task.metadata.get("unsupported"):
        out["reasons"] = [f"unsupported here: {r}" for r in task.metadata["unsupported"]]
        return out
    if not (task.metadata.get("solution") or task.metadata.get("patch")):
        raise ValueError(f"task {task.id} has no oracle solution (solution/solve.sh or patch)")
    repos = list(repos)
    ctx, oracle_passes, empty_fails = ProbeContext(), 0, 0
    for _ in range(runs):
        score, files = oracle_outputs(task, backend, repos)
        if score >= PASS_THRESHOLD:
            oracle_passes += 1
            if ctx.oracle_files is None:
                ctx.oracle_files = files
        res = check_task(task, empty=True, repos=repos, backend=backend)
        empty_fails += res["reward"] < PASS_THRESHOLD
    out["stability"].update(oracle_passes=oracle_passes, empty_fails=empty_fails)
    out["oracle"], out["empty"] = oracle_passes == runs, empty_fails < runs
    reasons = []
    if oracle_passes < runs:
        reasons.append(f"oracle passed only {oracle_passes}/{runs} runs")
    if empty_fails < runs:
        reasons.append(f"the empty solution passed {runs - empty_fails}/{runs} runs")
    results = run_probes(
        task, names, ctx if ctx.oracle_files is not None else ProbeContext({}), backend, repos
    )
    for name, r in results.items():
        out["probes"][name] = r.fooled
        if not r.applicable:
            out["not_applicable"].append(name)
        if r.fooled:
            reasons.append(f"probe {name} fooled the verifier: {r.detail}")
    out["reasons"], out["accepted"] = reasons, not reasons
    return out
