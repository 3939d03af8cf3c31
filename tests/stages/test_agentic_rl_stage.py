"""The agentic_rl stage kind end to end from a YAML config: world tasks -> in-process
environment services -> worker threads -> async trainer -> checkpoint; bad configs fail clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from arcforge.errors import ConfigError, UserError
from arcforge.pipeline import run_pipeline
from arcforge.run_config import load_config

CONFIG = Path(__file__).with_name("agentic_rl_smoke.yaml")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """One run dir: the world and tokenizer are made once and reused by every test here."""
    return tmp_path_factory.mktemp("agentic")


def test_stage_runs_from_yaml_and_writes_a_checkpoint(run_dir):
    run_pipeline(load_config(CONFIG), run_dir, evaluate=False, report=False)
    out = run_dir / "agentic"
    summary = json.loads((out / "DONE").read_text())
    assert summary["mixture"] == {"search": 0.5, "tool": 0.5} and summary["failed"] == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["version"] for r in rows] == [1, 2, 3]
    assert all(r["groups_search"] == 1 and r["groups_tool"] == 1 for r in rows)
    assert all(r["staleness_max"] <= 1 for r in rows)
    # the summary's per-pool rewards are the first and last steps' reward_<pool> (3 steps: k=1)
    for pool in ("search", "tool"):
        assert summary["pool_reward"][pool] == [
            round(rows[0][f"reward_{pool}"], 3),
            round(rows[-1][f"reward_{pool}"], 3),
        ]
    tokens = {p: sum(r[f"tokens_{p}"] for r in rows) for p in ("search", "tool")}
    assert sum(tokens.values()) == sum(r["trained_tokens"] for r in rows)  # shares of one total
    for pool in ("search", "tool"):  # (the untrained model's episodes may all be overlong)
        assert summary["pool_tokens"][pool] == round(tokens[pool] / max(1, sum(tokens.values())), 3)
        assert summary["pool_signal"][pool] == round(sum(r[f"signal_{pool}"] for r in rows) / 3, 3)
        solved = [round(rows[i][f"solved_{pool}"], 3) for i in (0, -1)]
        assert summary["pool_solved"][pool] == solved
        assert all(s <= r for s, r in zip(solved, summary["pool_reward"][pool]))
    assert (out / "checkpoint" / "config.json").exists()


def test_bad_stage_configs_name_the_problem(run_dir):
    with pytest.raises(ConfigError, match="stages\\[0\\].taus"):
        load_config(CONFIG, ["stages.agentic.taus=3"])
    with pytest.raises(ConfigError, match="backend"):
        load_config(CONFIG, ["stages.agentic.backend=slurm"])
    chat_only = ["stages.agentic.name=chat", "stages.chat.sources=[{source: 'world:chat'}]"]
    cfg = load_config(CONFIG, chat_only)
    with pytest.raises(UserError, match="task kind\\(s\\) \\['chat'\\] with no environment"):
        run_pipeline(cfg, run_dir, evaluate=False, report=False)
    cfg = load_config(CONFIG, ["stages.agentic.name=long", "stages.long.context_budget=4096"])
    with pytest.raises(UserError, match="context_budget 4096 exceeds .* 2048"):
        run_pipeline(cfg, run_dir, evaluate=False, report=False)
    cfg = load_config(CONFIG, ["stages.agentic.name=odd", "stages.odd.groups_per_step=3"])
    with pytest.raises(ConfigError, match="a batch of 3 groups cannot hold the mixture"):
        run_pipeline(cfg, run_dir, evaluate=False, report=False)


def test_call_credit_reaches_the_tool_environments_and_not_http_services(world):
    """The stage's call_credit is the in-process tool environments' process reward (a wrong
    answer that made one of two reference calls scores half of it); with HTTP services it is an
    error, since a service scores as it was started."""
    from arcforge.stages.agentic_rl import AgenticRLStageCfg, _services
    from arcforge.types import Message, ToolCall

    def stage(**kw):
        return AgenticRLStageCfg.model_validate(
            {"name": "a", "kind": "agentic_rl", "sources": [{"source": "world:tool"}], **kw}
        )

    task = next(t for t in world.tasks("tool") if len(t.metadata["calls"]) == 2)
    call = task.metadata["calls"][0]
    scores = []
    for credit in (0.0, 0.5):
        (svc,) = _services(stage(call_credit=credit), ["tool"], world)
        env = svc.open(task)
        env.reset(task)
        env.step(
            Message("assistant", "", tool_calls=[ToolCall(call["name"], call["arguments"], "c0")])
        )
        env.step(Message("assistant", "Answer: nobody"))
        scores.append(env.verify().score)
    assert scores == [0.0, 0.25]
    with pytest.raises(UserError, match="call_credit .* HTTP service"):
        _services(stage(call_credit=0.5, services=[{"url": "http://127.0.0.1:9"}]), ["tool"], world)
    with pytest.raises(ValidationError, match="call_credit"):
        stage(call_credit=1.0)


def test_difficulty_band_cuts_the_task_pools(tmp_path):
    """`difficulty: [lo, hi]` keeps the tasks inside the band and those without a difficulty;
    a band that leaves a source empty is an error naming the source and the band."""
    from arcforge.stages.agentic_rl import AgenticRLStageCfg, pool_settings

    rows = [
        {
            "id": f"m{i}",
            "kind": "math",
            "instruction": f"{i} + 1?",
            "difficulty": d,
            "validation": {"answer": str(i + 1)},
        }
        for i, d in enumerate([0.0, 0.25, 0.5, 1.0])
    ]
    rows.append(
        {"id": "free", "kind": "math", "instruction": "2 + 2?", "validation": {"answer": "4"}}
    )
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def cfg(band):
        return AgenticRLStageCfg.model_validate(
            {
                "name": "a",
                "kind": "agentic_rl",
                "difficulty": band,
                "sources": [{"source": f"jsonl:{path}"}],
            }
        )

    pools, weights, _ = pool_settings(cfg([0.0, 0.25]))
    assert sorted(t.id for t in pools["math"]) == ["free", "m0", "m1"] and weights == {"math": 1.0}
    assert len(pool_settings(cfg(None))[0]["math"]) == 5
    rows = [r for r in rows if "difficulty" in r]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=r"holds no tasks in the difficulty band \[0.6, 0.9\]"):
        pool_settings(cfg([0.6, 0.9]))


def test_a_source_band_replaces_the_stage_band_for_that_source(tmp_path):
    """`sources: [{source, difficulty: [lo, hi]}]` cuts that source only; the others keep the
    stage's band (none here); a bad band is a config error naming the key."""
    from arcforge.stages.agentic_rl import AgenticRLStageCfg, pool_settings

    def write(name, kind, diffs):
        path = tmp_path / f"{name}.jsonl"
        rows = [
            {
                "id": f"{name}{i}",
                "kind": kind,
                "instruction": f"{name} {i}?",
                "difficulty": d,
                "validation": {"answer": str(i)},
            }
            for i, d in enumerate(diffs)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return f"jsonl:{path}"

    easy_only = {"source": write("s", "search", [0.25, 0.5, 0.75, 0.25]), "difficulty": [0, 0.25]}
    every = {"source": write("m", "math", [0.25, 0.5, 1.0])}
    cfg = AgenticRLStageCfg.model_validate(
        {"name": "a", "kind": "agentic_rl", "sources": [easy_only, every]}
    )
    pools, _, _ = pool_settings(cfg)
    assert sorted(t.id for t in pools["search"]) == ["s0", "s3"]
    assert sorted(t.id for t in pools["math"]) == ["m0", "m1", "m2"]
    with pytest.raises(ValidationError, match="difficulty must be"):
        AgenticRLStageCfg.model_validate(
            {"name": "a", "kind": "agentic_rl", "sources": [{**every, "difficulty": [0.5, 0.25]}]}
        )


def test_a_source_may_sample_at_its_own_temperature(tmp_path):
    """`sources: [{source, temperature}]` sets its pool's sampling temperature (the others keep
    the stage's); of two sources of one kind at different temperatures, the second gets a
    pool of its own (`search@0.9`), with its own tasks and weight."""
    from arcforge.stages.agentic_rl import AgenticRLStageCfg, pool_settings

    def write(name, kind):
        path = tmp_path / f"{name}.jsonl"
        rows = [
            {
                "id": f"{name}{i}",
                "kind": kind,
                "instruction": f"{name} {i}?",
                "validation": {"answer": str(i)},
            }
            for i in range(3)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return f"jsonl:{path}"

    cold, math = write("s", "search"), write("m", "math")

    def cfg(*sources):
        return AgenticRLStageCfg.model_validate(
            {"name": "a", "kind": "agentic_rl", "temperature": 0.9, "sources": list(sources)}
        )

    _, _, temps = pool_settings(cfg({"source": cold, "temperature": 0.5}, {"source": math}))
    assert temps == {"search": 0.5, "math": 0.9}
    assert cfg({"source": math}).agent(0.5).temperature == 0.5
    assert cfg({"source": math}).agent().temperature == 0.9
    other = write("s2", "search")
    pools, weights, temps = pool_settings(
        cfg({"source": cold, "temperature": 0.5}, {"source": other, "weight": 2})
    )
    assert temps == {"search": 0.5, "search@0.9": 0.9} and weights == {"search": 1, "search@0.9": 2}
    assert [t.instruction for t in pools["search@0.9"]] == ["s2 0?", "s2 1?", "s2 2?"]
    assert [t.instruction for t in pools["search"]] == ["s 0?", "s 1?", "s 2?"]
    pools, _, temps = pool_settings(cfg({"source": cold}, {"source": other}))  # one temperature
    assert temps == {"search": 0.9} and len(pools["search"]) == 6
    with pytest.raises(ValidationError, match="greater than 0"):
        cfg({"source": math, "temperature": 0})
