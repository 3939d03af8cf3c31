"""Exports of agentic synthesis: SFT JSONL from clean trajectories, RL task pools from tasks.

SFT (`export_sft`): each kept trajectory becomes `{"messages": [...], "tool_schemas": [...],
"task_id", "reward"}`, the shape `jsonl:` sources and the SFT stage read. Tool observations are
marked `train: false` (the chat template masks them anyway; the mark makes the file
self-describing). Filters, each counted by reason: correctness (reward >= threshold), exploit
(synth/detect.py flags on the passing trajectory), difficulty band on steps (assistant
tool-calling turns within [min_steps, max_steps]).

RL (`export_rl_pool`): tasks as arcforge Task records (task + environment config + verifier):
the verifier travels in the Task itself (terminal: verify script and hidden test files; SWE:
F2P/P2P + test patch), the environment config in `metadata["env"]` ({"kind", "backend",
...}). `jsonl:` sources read them as task records and `envs.registry.make_env` opens them.
`pass_rate_band` is the difficulty filter from k attempts per task (too easy and never-solved
tasks give GRPO no signal). Sources: SWE-bench instance JSONL (swe synthesis), Harbor /
Terminal-Bench directories (terminal synthesis), or Task JSONL.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arcforge.envs.importers import import_task_dir, swebench_task
from arcforge.errors import UserError
from arcforge.synth.detect import detect_exploits
from arcforge.synth.pipeline import parse_jsonl
from arcforge.types import Message, Task, Tool, Trajectory


def sft_line(traj: Trajectory, tools: list[Tool] | None = None) -> dict[str, Any]:
    """One SFT record; tool observations marked non-trainable."""
    msgs = [
        Message(**{**m.__dict__, "train": False}) if m.role == "tool" else m for m in traj.messages
    ]
    schemas = [
        {"name": t.name, "description": t.description, "parameters": t.parameters}
        for t in tools or []
    ]
    return {
        "messages": [m.to_dict() for m in msgs],
        "tool_schemas": schemas,
        "task_id": traj.task_id,
        "reward": traj.reward,
    }


def steps_of(traj: Trajectory) -> int:
    """Assistant turns that called tools (the agent's actions)."""
    return sum(1 for m in traj.messages if m.role == "assistant" and m.tool_calls)


def export_sft(
    trajs: Iterable[Trajectory],
    path: str | Path,
    tools: list[Tool] | None = None,
    threshold: float = 1.0,
    min_steps: int = 1,
    max_steps: int = 1_000,
) -> dict[str, Any]:
    """Write the clean, passing trajectories as SFT JSONL; returns {"kept", "dropped": {...}}."""
    dropped: Counter = Counter()
    lines = []
    for t in trajs:
        if t.reward < threshold:
            dropped["failed"] += 1
            continue
        flags = detect_exploits(t)
        if flags:
            dropped[f"exploit: {flags[0].kind}"] += 1
            continue
        n = steps_of(t)
        if not min_steps <= n <= max_steps:
            dropped["too few steps" if n < min_steps else "too many steps"] += 1
            continue
        lines.append(json.dumps(sft_line(t, tools), ensure_ascii=False))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(x + "\n" for x in lines))
    return {"kept": len(lines), "dropped": dict(sorted(dropped.items())), "out": str(p)}


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Trajectory JSONL (Trajectory.to_dict per line); UserError names a bad line."""
    return parse_jsonl(path, Trajectory.from_dict, "not a trajectory")


def load_tasks(source: str | Path) -> list[Task]:
    """Tasks from a SWE instance JSONL (records with repo_path), a Task JSONL, a task directory
    (Harbor / Terminal-Bench) or a directory of task directories."""
    p = Path(source)
    if p.is_dir():
        if (p / "task.toml").is_file() or (p / "task.yaml").is_file():
            return [import_task_dir(p)]
        return [
            import_task_dir(d)
            for d in sorted(p.iterdir())
            if (d / "task.toml").is_file() or (d / "task.yaml").is_file()
        ]
    if not p.is_file():
        raise UserError(f"{p}: no such task file or directory")
    tasks = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if "instance_id" in rec:
                if "repo_path" not in rec:
                    raise ValueError("SWE instance lacks repo_path (the local clone)")
                tasks.append(swebench_task(rec, rec["repo_path"]))
            else:
                tasks.append(Task.from_dict(rec))
        except (ValueError, KeyError, TypeError) as err:
            raise UserError(f"{p}:{n}: {err}") from None
    return tasks


def pass_rate_band(
    tasks: list[Task], rewards: dict[str, list[float]], lo: float = 0.0, hi: float = 1.0
) -> tuple[list[Task], Counter]:
    """Keep tasks whose pass rate over their k attempts lies in [lo, hi] (exclusive of a
    rate of exactly 0 when lo > 0, and of 1 when hi < 1); tasks without attempts are kept."""
    kept, dropped = [], Counter()
    for t in tasks:
        r = rewards.get(t.id)
        rate = sum(x >= 1.0 for x in r) / len(r) if r else None
        if rate is not None and rate < lo:
            dropped["too hard"] += 1
        elif rate is not None and rate > hi:
            dropped["too easy"] += 1
        else:
            kept.append(t)
    return kept, dropped


def export_rl_pool(
    tasks: Iterable[Task],
    path: str | Path,
    backend: str = "bwrap",
    env_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write tasks (+ their environment config) as a Task JSONL RL pool."""
    lines, kinds = [], Counter()
    for t in tasks:
        env = {"kind": t.kind, "backend": backend, **(env_options or {})}
        rec = Task.from_dict({**t.to_dict(), "metadata": {**t.metadata, "env": env}})
        lines.append(json.dumps(rec.to_dict(), ensure_ascii=False))
        kinds[t.kind] += 1
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(x + "\n" for x in lines))
    return {"tasks": len(lines), "kinds": dict(kinds), "out": str(p)}
