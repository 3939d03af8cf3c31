"""`world:swarm` and `world:episodes/swarm` sources: wide tasks for the orchestrator's RL pool,
and the scripted orchestrator's verified episodes for SFT, cached per run."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from arcforge.errors import ConfigError
from arcforge.pipeline import RunContext
from arcforge.run_config import load_config
from arcforge.stages.world_source import world_records


def test_world_swarm_resolves_to_wide_tasks_of_the_split(world):
    train = world_records(world, "swarm", None)
    test = world_records(world, "swarm", "test")
    assert train and test
    assert all(r.task is not None and r.task.kind == "swarm" for r in train)
    train_prompts = {r.prompt for r in train}
    assert not train_prompts & {r.prompt for r in test}  # entities no train item uses
    with pytest.raises(ConfigError, match="world:swarm:dev"):
        world_records(world, "swarm", "dev")


@pytest.mark.slow  # records three orchestrator episodes over subagents: make test-all
def test_swarm_episodes_are_recorded_once_and_read_back(world, tok, tmp_path):
    world = copy.copy(world)  # the session's world stays as it is
    world.config = dataclasses.replace(
        world.config, episodes=dataclasses.replace(world.config.episodes, swarm=3), scale=1.0
    )
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: t\nmodel: {preset: nano, max_position_embeddings: 4096}\n"
        "eval: {suites: [], max_turns: 4, max_new_tokens: 256}\n"
    )
    cfg = load_config(path)
    ctx = RunContext(cfg, tmp_path, _world=world, _tokenizer=tok)
    recs = world_records(world, "episodes/swarm", None, ctx)
    assert recs, "the scripted orchestrator keeps its verified episodes"
    tools = set(recs[0].meta["tools"])
    assert {"create_subagent", "assign_task"} <= tools
    assert [m.role for m in recs[0].messages[:2]] == ["system", "user"]
    meta = json.loads((tmp_path / "world" / "episodes" / "swarm.json").read_text())
    assert meta["stats"]["episodes"] == 3
    # read back from the cache, not re-run: the same conversations
    again = world_records(world, "episodes/swarm", None, ctx)
    assert [r.messages for r in again] == [r.messages for r in recs]
    with pytest.raises(ConfigError, match="train tasks only"):
        world_records(world, "episodes/swarm", "test", ctx)
