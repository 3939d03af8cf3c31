"""The agentic_rl stage with swarm tasks: the orchestrator trains while its subagents run on a
frozen earlier stage's checkpoint; the PARL terms and critical steps reach the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arcforge.errors import UserError
from arcforge.pipeline import run_pipeline
from arcforge.run_config import load_config
from arcforge.stages.agentic_rl import _swarm_pool
from arcforge.world import World
from arcforge.world.tasks.wide_search import swarm_tasks

CONFIG = Path(__file__).with_name("agentic_rl_smoke.yaml")


def _config(tmp_path: Path, tasks: Path | None) -> Path:
    """The smoke config's stage as `warm`, then (with `tasks`) an orchestrator stage on them."""
    text = (
        CONFIG.read_text()
        .replace("name: agentic\n", "name: warm\n")
        .replace("steps: 3", "steps: 1")
    )
    if tasks is not None:
        text += f"""  - name: orchestrator
    kind: agentic_rl
    sources:
      - {{source: "jsonl:{tasks}", weight: 1}}
    swarm: {{subagents: warm, subagent_max_turns: 2, subagent_max_new_tokens: 16,
            anneal_steps: 4}}
    steps: 2
    groups_per_step: 2
    group_size: 2
    tau: 1
    workers: 2
    max_turns: 2
    max_new_tokens: 16
    context_budget: 1536
"""
    path = tmp_path / "swarm.yaml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_swarm_source_trains_the_orchestrator_over_frozen_subagents(tmp_path):
    run_pipeline(load_config(_config(tmp_path, None)), tmp_path, evaluate=False, report=False)
    world = World.load(tmp_path / "world")
    tasks = tmp_path / "swarm.jsonl"
    tasks.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in swarm_tasks(world)[:8]))
    cfg = load_config(_config(tmp_path, tasks))
    run_pipeline(cfg, tmp_path, evaluate=False, report=False)
    rows = [
        json.loads(x)
        for x in (tmp_path / "orchestrator" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [r["version"] for r in rows] == [1, 2]
    for r in rows:
        assert r["groups_swarm"] == 2
        assert {
            "swarm_r_task",
            "swarm_r_parallel",
            "swarm_r_finish",
            "swarm_lambda1",
            "swarm_critical_steps",
        } <= set(r)
        assert r["swarm_critical_steps"] >= 1
        # lambda1 = 0.1 * (1 - step / 4) at the step the episode ended
        assert 0.0 <= r["swarm_lambda1"] <= 0.1 + 1e-9
    assert (tmp_path / "orchestrator" / "checkpoint" / "config.json").exists()


def test_swarm_tasks_without_a_swarm_block_fail_clearly(tmp_path):
    stage = load_config(_config(tmp_path, None)).stages[0]
    with pytest.raises(UserError, match="swarm tasks need a `swarm:` block"):
        _swarm_pool(None, stage, ["search", "swarm"])  # checked before any model is loaded
    assert _swarm_pool(None, stage, ["search", "tool"]) is None
