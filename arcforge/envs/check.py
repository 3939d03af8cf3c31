"""`arcforge env check`: run a task's oracle (or a given solution, or none) and grade it.

`check_task` loads a task (a Task, a Terminal-Bench / Harbor directory, a Task JSON/JSONL file
or a SWE-bench instance JSON/JSONL; grading one needs its clone in `repo_path` and runs under
its environment, swe_repo_env.py), opens the matching environment,
applies the solution the way an agent could (a shell script run in /workspace for terminal
tasks; a unified diff applied with git/patch for SWE tasks) and returns the environment's
verdict as `{"reward": float, "details": {...}}`. This is the environment-stability probe of
synthesis (oracle passes, empty fails) and the acceptance check for imported tasks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arcforge.envs.importers import import_task_dir, swebench_task
from arcforge.envs.swe_repo_env import task_env
from arcforge.envs.swe_venv import EnvBuildError
from arcforge.envs.terminal_env import format_exec
from arcforge.sandbox import SandboxError
from arcforge.sandbox.rootfs_build import NET_FAILURE
from arcforge.types import Task
from arcforge.world.code.repos import Repo


def load_task(path: str | Path, container: bool | None = None) -> Task:
    """A task from a directory (Terminal-Bench/Harbor) or the first record of a JSON(L) file.
    `container`: import a task directory as a container-like root (None: when it has a
    Dockerfile; see importers.py)."""
    p = Path(path)
    if p.is_dir():
        return import_task_dir(p, container)
    if not p.is_file():
        raise ValueError(f"{p}: no such task directory or file")
    text = p.read_text().strip()
    rec = json.loads(text.splitlines()[0] if p.suffix == ".jsonl" else text)
    if "instance_id" in rec and "base_commit" in rec:  # a SWE-bench instance
        return _swebench_instance(rec)
    return Task.from_dict(rec)


def _swebench_instance(rec: dict[str, Any]) -> Task:
    """A SWE-bench instance as a swe Task; grading needs its clone (`repo_path`) and runs under
    its environment (`environment_setup_commit`, `install`; see swe_repo_env.py)."""
    from arcforge.envs.swe_repo_env import instance_blockers

    blockers = instance_blockers(rec)
    task = swebench_task(
        {"problem_statement": "", **rec}, rec.get("repo_path") or "/nonexistent-clone"
    )
    task.metadata["unsupported"] = blockers + [
        r for r in task.metadata["unsupported"] if "is not a git clone" not in r
    ]
    task.metadata["swe_env"] = {
        "commit": rec.get("environment_setup_commit") or rec["base_commit"],
        "install": rec.get("install"),
    }
    return task


def _solve_terminal(env: Any, task: Task, solution: str) -> dict[str, Any]:
    res = env.run_script(solution)
    out = {"solution_exit_code": res.exit_code, "solution_output": format_exec(res)[-1000:]}
    line = _net_line(res.stdout + res.stderr)
    if line and not LOCAL.search(line):  # (a local service refusing is no network need)
        out["network_failure"] = line[:200]
    return out


LOCAL = re.compile(r"localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0")


def _net_line(text: str) -> str:
    """The first output line showing a network failure, preferring a remote host's."""
    lines = [ln.strip() for ln in text.splitlines() if NET_FAILURE.search(ln)]
    remote = [ln for ln in lines if not LOCAL.search(ln)]
    return (remote or lines or [""])[0]


def _solve_swe(env: Any, task: Task, solution: str) -> dict[str, Any]:
    res = env.apply_patch(solution)
    return {"patch_applied": res.exit_code == 0, "patch_output": format_exec(res)[-1000:]}


def check_task(
    task_or_path: Task | str | Path,
    solution: str | None = None,
    empty: bool = False,
    repos: Iterable[Repo] = (),
    backend: str = "bwrap",
    container: bool | None = None,
) -> dict[str, Any]:
    """Grade a task with its oracle, a given solution, or nothing.

    Args:
        task_or_path: a Task, or a path `load_task` understands.
        solution: shell script (terminal) or unified diff (swe); None = the task's oracle
            (metadata["solution"] / metadata["patch"]). A path to a file is read.
        empty: run no solution at all (the verifier must then fail).
        repos: the world's repos, for world SWE tasks.
        backend: sandbox backend.
        container: for a task directory, container mode on/off (None: when it has a Dockerfile).
    Returns:
        {"reward": float, "details": {...}}; an unsupported task gets reward 0 and
        details["unsupported"] naming the reasons.
    """
    from arcforge.envs.swe_env import SWEEnv
    from arcforge.envs.terminal_env import TerminalEnv

    task = task_or_path if isinstance(task_or_path, Task) else load_task(task_or_path, container)
    if task.metadata.get("unsupported"):
        return {
            "reward": 0.0,
            "details": {"task": task.id, "unsupported": task.metadata["unsupported"]},
        }
    if (
        solution is not None
        and len(solution) < 4096
        and "\n" not in solution
        and Path(solution).is_file()
    ):
        solution = Path(solution).read_text()
    if task.kind == "terminal":
        env: Any = TerminalEnv(backend=backend)
        oracle, solve = task.metadata.get("solution"), _solve_terminal
    elif task.kind == "swe" and "swe_env" in task.metadata:
        try:
            env = task_env(task, backend)
        except EnvBuildError as err:
            why = f"environment install failed: {err}: {err.log.strip()[-300:]}"
            return {"reward": 0.0, "details": {"task": task.id, "unsupported": [why]}}
        oracle, solve = task.metadata.get("patch"), _solve_swe
    elif task.kind == "swe":
        env, oracle, solve = SWEEnv(repos, backend=backend), task.metadata.get("patch"), _solve_swe
    else:
        raise ValueError(f"env check supports terminal and swe tasks, not {task.kind!r}")
    mode = "empty" if empty else "given" if solution is not None else "oracle"
    script = None if empty else solution if solution is not None else oracle
    if mode == "oracle" and not script:
        raise ValueError(f"task {task.id} has no oracle solution; pass one or use empty=True")
    try:
        env.reset(task)
        details: dict[str, Any] = {"task": task.id, "solution": mode}
        if script:
            details.update(solve(env, task, script))
        reward = env.verify()
        if mode == "oracle" and reward.score < 1.0 and details.get("network_failure"):
            details["unsupported"] = [
                "needs network access at solve time: the reference solution reached for the "
                f"network, which episodes do not have ({details['network_failure']})"
            ]
        test_out = str(reward.details.get("output", ""))
        if reward.score < 1.0 and task.kind == "terminal" and (line := _net_line(test_out)):
            details.setdefault("unsupported", []).append(
                "needs network access at test time: the verifier reached for the network, "
                f"which episodes do not have ({line[:200]})"
                if not LOCAL.search(line)
                else "the solution's daemon is gone at test time: an episode keeps no process "
                f"alive after the command that started it ({line[:200]})"
            )
    except SandboxError as err:
        return {"reward": 0.0, "details": {"task": task.id, "error": f"sandbox: {err}"}}
    finally:
        env.close()
    return {"reward": reward.score, "details": {**details, **reward.details}}
