"""`tasks:<dir>`: a folder of Terminal-Bench 1 / Terminal-Bench 2 (Harbor) task directories,
each scored by its own verifier with the model as the agent in the task's real root.

The scaffold, `arcforge-terminal-v1`:
- the task is imported as `arcforge env check` imports it (arcforge.envs.importers: container
  mode for a task with a Dockerfile, the real root built from it) and opened in a TerminalEnv:
  the agent works in the task's working directory (/app for most tasks) through three tools,
  `bash(command)`, `view_file(path)` and `edit_file(path, old, new)`, each observation cut to
  8000 characters;
- a system prompt says so and asks for a reply without tool calls when the work is done; up to
  `turns` assistant replies (`?turns=`, default 30); the reply length is the responder's own
  limit (its max_new_tokens / max_tokens), recorded in the report when the responder has one;
- the task's own timeouts apply: the agent's time (TB1 `max_agent_timeout_sec`, Harbor
  `[agent] timeout_sec`; default 600 s) bounds the whole episode and each command, and the
  verifier runs with its own (`max_test_timeout_sec`, `[verifier] timeout_sec`);
- a reply without tool calls ends the episode (its ```bash blocks run first, as TerminalEnv
  does for every terminal task); then the verifier runs: exit code 0, or Harbor's
  /logs/verifier/reward.txt. A task passes when its reward is 1.
`?k=` attempts per task (default 1): the item score is pass@1 (the share of attempts that
pass) and the suite reports pass@k (the unbiased estimate) beside it. The baseline is the empty
solution: the verifier on the untouched task (`?baseline=0` skips it). A task that cannot run
here (its importer lists blockers) is left out of the score and named in meta["skipped"].

Options: `n`, `seed` (the draw), `turns`, `k`, `baseline`, `container` (1/0: force container
or rewrite mode; default: container mode when the task has a Dockerfile), `tool_timeout`
(seconds per command, default min(180, the agent time)).
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import yaml

from arcforge.errors import UserError
from arcforge.eval.external.base import (
    ItemResult,
    Responder,
    SuiteResult,
    SuiteSpec,
    drive,
    pass_at_k,
    register,
)

SCAFFOLD = "arcforge-terminal-v1"
DEFAULT_TURNS = 30
DEFAULT_AGENT_TIMEOUT = 600.0
SYSTEM = (
    "You are an agent working in a Linux container on the task the user gives. Use the tools: "
    "bash runs a command in the task's working directory, view_file shows a file, edit_file "
    "replaces text in a file. Work step by step and check your work. When the task is done, "
    "reply without calling a tool."
)


def task_dirs(root: Path) -> list[Path]:
    """The task directories under `root` (itself, or its subdirectories, two levels at most),
    sorted by path."""

    def is_task(p: Path) -> bool:
        return (p / "task.toml").is_file() or (p / "task.yaml").is_file()

    if is_task(root):
        return [root]
    found = []
    for p in sorted(root.iterdir()):
        if p.is_dir() and is_task(p):
            found.append(p)
        elif p.is_dir():
            found += [q for q in sorted(p.iterdir()) if q.is_dir() and is_task(q)]
    return found


def agent_timeout(path: Path) -> float:
    """The task's own agent time limit, from task.toml or task.yaml."""
    try:
        if (path / "task.toml").is_file():
            spec = tomllib.loads((path / "task.toml").read_text())
            value = (spec.get("agent") or {}).get("timeout_sec")
        else:
            spec = yaml.safe_load((path / "task.yaml").read_text()) or {}
            value = spec.get("max_agent_timeout_sec")
        return float(value) if value else DEFAULT_AGENT_TIMEOUT
    except (ValueError, TypeError, OSError, tomllib.TOMLDecodeError, yaml.YAMLError):
        return DEFAULT_AGENT_TIMEOUT


class TasksSuite:
    """The `tasks:<dir>` suite (see the module docstring)."""

    def __init__(self, spec: SuiteSpec) -> None:
        self.spec = spec
        self.root = Path(spec.arg).expanduser()
        if not self.root.is_dir():
            raise UserError(f"{spec.name}: {self.root} is not a directory of task directories")
        self.dirs = task_dirs(self.root)
        if not self.dirs:
            raise UserError(
                f"{spec.name}: no Terminal-Bench (task.yaml) or Harbor (task.toml) task "
                f"directory in {self.root} or its subdirectories"
            )
        self.turns = spec.int_option("turns", DEFAULT_TURNS)
        self.k = spec.int_option("k", 1)
        self.baseline = spec.int_option("baseline", 1, lo=0) > 0
        c = spec.options.get("container")
        self.container = None if c in (None, "") else c not in ("0", "false", "no")
        self.tool_timeout = spec.options.get("tool_timeout")

    def _env(self, path: Path, task: Any) -> Any:
        from arcforge.envs.terminal_env import TerminalEnv

        limit = agent_timeout(path)
        tool = float(self.tool_timeout) if self.tool_timeout else min(180.0, limit)
        verify = float(task.metadata.get("verify_timeout") or 120.0)
        return TerminalEnv(tool_timeout=tool, verify_timeout=verify), limit

    def attempt(self, path: Path, task: Any, responder: Responder | None) -> dict[str, Any]:
        """One episode of one task (responder None: the empty solution) and its verdict."""
        env, limit = self._env(path, task)
        out: dict[str, Any] = {}
        t0 = time.monotonic()
        try:
            opening = env.reset(task)
            if responder is not None:
                ep = drive(env, opening, responder, self.turns, t0 + limit, SYSTEM)
                out.update(turns=ep.turns, stop=ep.stop)
                if ep.error:
                    out["error"] = ep.error
            reward = env.verify()
            out.update(reward=reward.score, verifier=reward.details.get("output", "")[-600:])
        except Exception as err:  # a sandbox fault fails this attempt, not the run
            out.update(reward=0.0, error=f"{type(err).__name__}: {err}")
        finally:
            env.close()
        out["seconds"] = round(time.monotonic() - t0, 1)
        return out

    def run(self, responder: Responder) -> SuiteResult:
        from arcforge.envs.importers import import_task_dir

        t0 = time.monotonic()
        drawn = self.spec.draw(self.dirs)
        items, skipped, empty, pass_k = [], {}, [], []
        for path in drawn:
            name = str(path.relative_to(self.root)) if path != self.root else path.name
            try:
                task = import_task_dir(path, self.container)
            except (ValueError, OSError) as err:
                skipped[name] = [f"import failed: {err}"]
                continue
            if task.metadata.get("unsupported"):
                skipped[name] = list(task.metadata["unsupported"])
                continue
            tries = [self.attempt(path, task, responder) for _ in range(self.k)]
            if all("is unsupported here" in str(t.get("error", "")) for t in tries):
                skipped[name] = [str(tries[0]["error"])]  # its root could not be built
                continue
            c = sum(t["reward"] >= 1.0 for t in tries)
            pass_k.append(pass_at_k(self.k, c, self.k))
            detail: dict[str, Any] = {"passed": c, "attempts": tries}
            detail["agent_timeout_s"] = agent_timeout(path)
            if self.baseline:
                base = self.attempt(path, task, None)
                empty.append(1.0 if base["reward"] >= 1.0 else 0.0)
                detail["empty_solution"] = base
            items.append(ItemResult(name, c / self.k, detail))
        meta = {
            "scaffold": SCAFFOLD,
            "tools": ["bash", "view_file", "edit_file"],
            "turns": self.turns,
            "k": self.k,
            f"pass@{self.k}": sum(pass_k) / len(pass_k) if pass_k else float("nan"),
            "draw": {"n": self.spec.n, "seed": self.spec.seed, "of": len(self.dirs)},
            "skipped": skipped,
            "wall_s": round(time.monotonic() - t0, 1),
        }
        limit = getattr(responder, "max_new_tokens", None) or getattr(responder, "max_tokens", None)
        if limit:
            meta["max_new_tokens"] = limit
        baselines = {"empty_solution": sum(empty) / len(empty)} if empty else {}
        return SuiteResult(self.spec.name, items, meta, baselines)


@register("tasks")
def _open(spec: SuiteSpec) -> TasksSuite:
    return TasksSuite(spec)
