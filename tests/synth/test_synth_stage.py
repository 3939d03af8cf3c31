"""The `synth` pipeline stage on a small world: synthetic SWE bugs in a world repository, an RL
pool the `jsonl:` source reads back, and config errors named."""

from __future__ import annotations

import pytest

from arcforge.config import ConfigError, parse_config
from arcforge.data.sources import load_records
from arcforge.envs.sandbox_bwrap import bwrap_available
from arcforge.pipeline import RunContext, run_stage

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.mark.slow
def test_synth_stage_on_world_repos(tmp_path):
    import arcforge.stages  # noqa: F401  (registers the stage kinds)

    raw = {"name": "t", "world": {"seed": 3, "scale": 0.1},
           "stages": [{"name": "synth", "kind": "synth", "swe_repos": 1, "swe_bugs": 3,
                       "runs": 1}]}  # fmt: skip
    cfg = parse_config(raw)
    ctx = RunContext(cfg, tmp_path)
    summary = run_stage(ctx, cfg.stages[0])
    repo = ctx.world.repos[0].name
    counts = summary["swe"][repo]
    assert counts["mutants"]["out"] == 3 and counts["validate"]["in"] == 3
    assert summary["swe_instances"] == counts["statement"]["out"] >= 1
    recs = load_records(f"jsonl:{tmp_path / 'synth' / 'rl_pool.jsonl'}")
    assert len(recs) == summary["swe_instances"]
    task = recs[0].task
    assert task.kind == "swe" and task.validation.fail_to_pass
    assert task.metadata["env"]["kind"] == "swe"
    assert (tmp_path / "synth" / "DONE").exists()


def test_synth_stage_config_errors():
    import arcforge.stages  # noqa: F401

    with pytest.raises(ConfigError, match="unknown key 'stages\\[0\\].swe_bug'"):
        parse_config({"stages": [{"name": "s", "kind": "synth", "swe_bug": 2}]})
    with pytest.raises(ConfigError, match="stages\\[0\\].runs"):
        parse_config({"stages": [{"name": "s", "kind": "synth", "runs": 0}]})
