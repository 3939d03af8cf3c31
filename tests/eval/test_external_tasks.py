"""`tasks:<dir>` on task directories in the real Terminal-Bench 1 and Harbor layouts (the
fixtures tests/envs/test_importers.py already grades with `arcforge env check`), 5 of the 6
drawn with seed 1: a scripted agent that types each task's reference solution into the bash
tool scores 1 on every task, one that does nothing scores 0, and the empty-solution baseline is
0 (slow: 10-20 s once the tasks' roots are cached; the default suite runs two tasks). The
first run on a machine builds the roots (minutes; tests/envs builds the same roots first).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from arcforge.envs.importers import import_task_dir
from arcforge.errors import UserError
from arcforge.eval.external import open_suite
from arcforge.eval.external.base import pass_at_k
from arcforge.eval.external.tasks import SCAFFOLD, agent_timeout, task_dirs
from arcforge.sandbox.bwrap import bwrap_available

FIXTURES = Path(__file__).resolve().parents[1] / "envs" / "fixtures"
TASKS = [
    "terminal-bench/hello-world",
    "terminal-bench/fix-permissions",
    "terminal-bench/uv-helpers",
    "terminal-bench/apt-outside-app",
    "harbor/hello-world",
    "harbor/csv-to-json",
]
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    for rel in TASKS:
        shutil.copytree(FIXTURES / rel, root / rel)
    return root


class TypesTheSolution:
    """Turn 1: the task's reference solution as one bash call; turn 2: done."""

    def __init__(self, folder: Path) -> None:
        tasks = [import_task_dir(p) for p in task_dirs(folder)]
        self.solutions = {t.instruction: t.metadata["solution"] for t in tasks}
        self.calls = 0

    def __call__(self, messages, tools=None):
        assert {t["function"]["name"] for t in tools} == {"bash", "view_file", "edit_file"}
        self.calls += 1
        if messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": "Done.", "tool_calls": None}
        user = next(m["content"] for m in messages if m["role"] == "user")
        args = json.dumps({"command": self.solutions[user]})
        call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}


def does_nothing(messages, tools=None):
    return {"role": "assistant", "content": "I will not do anything.", "tool_calls": None}


def test_names_options_and_task_discovery(folder, tmp_path):
    assert len(task_dirs(folder)) == 6
    assert agent_timeout(folder / "terminal-bench/hello-world") == 360.0  # task.yaml
    assert agent_timeout(folder / "harbor/hello-world") == 120.0  # task.toml [agent]
    with pytest.raises(UserError, match="not a directory"):
        open_suite(f"tasks:{tmp_path / 'missing'}")
    with pytest.raises(UserError, match="no Terminal-Bench"):
        open_suite(f"tasks:{tmp_path}")
    with pytest.raises(UserError, match="turns"):
        open_suite(f"tasks:{folder}?turns=zero")
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)


@needs_bwrap
def test_two_tasks_in_the_default_suite(folder, tmp_path):
    """One task of each layout, no baseline run: the fast part of the test below."""
    for rel in ("terminal-bench/fix-permissions", "harbor/csv-to-json"):
        shutil.copytree(folder / rel, tmp_path / rel)
    name = f"tasks:{tmp_path}?turns=3&baseline=0"
    assert open_suite(name).run(TypesTheSolution(tmp_path)).score == 1.0
    assert open_suite(name).run(does_nothing).score == 0.0


@needs_bwrap
@pytest.mark.slow  # 10-20 s on the shared cores once the roots are cached
def test_reference_solution_scores_1_and_doing_nothing_scores_0_on_5_real_tasks(folder):
    name = f"tasks:{folder}?n=5&seed=1&turns=4"
    solver = TypesTheSolution(folder)
    res = open_suite(name).run(solver)
    print(json.dumps({i.id: i.score for i in res.items}), res.meta["wall_s"])
    assert len(res.items) == 5 and not res.meta["skipped"], res.meta["skipped"]
    assert res.score == 1.0, {i.id: i.detail for i in res.items if i.score < 1}
    assert res.meta["pass@1"] == 1.0 and res.meta["scaffold"] == SCAFFOLD
    assert res.baselines == {"empty_solution": 0.0}
    assert all(i.detail["attempts"][0]["stop"] == "answer" for i in res.items)
    assert solver.calls == 10  # two turns per task

    idle = open_suite(name + "&baseline=0").run(does_nothing)
    assert [i.id for i in idle.items] == [i.id for i in res.items]
    assert idle.score == 0.0 and idle.ci[0] == 0.0 and idle.baselines == {}
    assert all(i.detail["attempts"][0]["turns"] == 1 for i in idle.items)
