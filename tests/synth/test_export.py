"""Exports: SFT JSONL from trajectories (filters counted, observations non-trainable, readable by
`jsonl:` sources and the chat template's mask), and RL task pools readable by `jsonl:` sources
and the environment registry."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from arcforge.chat import render
from arcforge.cli import app
from arcforge.data.sources import load_records
from arcforge.envs.registry import make_env
from arcforge.synth.export import export_rl_pool, export_sft, load_tasks, pass_rate_band
from arcforge.types import Message, Task, Tool, ToolCall, Trajectory, Validation

FIXTURES = Path(__file__).parents[1] / "envs" / "fixtures"


def bash(command: str) -> str:
    """Run a command.

    Args:
        command: the command line.
    """
    return command


def traj(cmds: list[str], reward: float, tid: str = "t") -> Trajectory:
    msgs = [Message("user", "fix calc.py")]
    for i, c in enumerate(cmds):
        msgs.append(
            Message(
                "assistant",
                "",
                reasoning="look",
                tool_calls=[ToolCall("bash", {"command": c}, f"c{i}")],
            )
        )
        msgs.append(Message("tool", f"output {i}", tool_call_id=f"c{i}"))
    msgs.append(Message("assistant", "Fixed."))
    return Trajectory(messages=msgs, reward=reward, task_id=tid)


def test_sft_export_filters_and_masks(tmp_path):
    trajs = [
        traj(["cat calc.py", "sed -i 's/-/+/' calc.py"], 1.0, "good"),
        traj(["rm -rf tests"], 1.0, "cheat"),
        traj(["cat calc.py"], 0.0, "failed"),
        traj([], 1.0, "no-steps"),
        traj(["ls"] * 5, 1.0, "long"),
    ]
    res = export_sft(trajs, tmp_path / "sft.jsonl", [Tool.from_function(bash)], max_steps=3)
    assert res["kept"] == 1
    assert res["dropped"] == {
        "exploit: touched_tests": 1,
        "failed": 1,
        "too few steps": 1,
        "too many steps": 1,
    }
    line = json.loads((tmp_path / "sft.jsonl").read_text())
    assert line["task_id"] == "good" and line["tool_schemas"][0]["name"] == "bash"
    assert [m.get("train", True) for m in line["messages"] if m["role"] == "tool"] == [False] * 2
    (rec,) = load_records(f"jsonl:{tmp_path / 'sft.jsonl'}")
    assert rec.messages is not None and rec.meta["tool_schemas"][0]["name"] == "bash"
    spans = render(rec.messages)
    assert not any(s.trainable for s in spans if s.kind == "observation")
    assert any(s.trainable for s in spans if s.kind == "tool_call")


def test_rl_pool_round_trips_through_sources_and_registry(tmp_path):
    swe = {
        "instance_id": "r__1",
        "repo": "r",
        "base_commit": "abc",
        "patch": "p",
        "test_patch": "",
        "problem_statement": "bug",
        "FAIL_TO_PASS": ["t.py::test_a"],
        "PASS_TO_PASS": [],
        "repo_path": str(tmp_path),
    }
    (tmp_path / "inst.jsonl").write_text(json.dumps(swe) + "\n")
    tasks = load_tasks(tmp_path / "inst.jsonl") + load_tasks(FIXTURES / "harbor")
    tasks.append(Task("m1", "math", "1+1?", validation=Validation(answer="2")))
    res = export_rl_pool(tasks, tmp_path / "pool.jsonl")
    assert res["kinds"] == {"swe": 1, "terminal": 2, "math": 1}
    recs = load_records(f"jsonl:{tmp_path / 'pool.jsonl'}")
    assert [r.task.id for r in recs] == [t.id for t in tasks]
    swe_task = recs[0].task
    assert swe_task.validation.fail_to_pass == ["t.py::test_a"]
    assert swe_task.metadata["env"] == {"kind": "swe", "backend": "bwrap"}
    term = recs[1].task
    assert term.validation.verify_script and term.metadata["test_files"]  # the verifier travels
    for r in recs:
        env = make_env(r.task, None, **({"repos": ()} if r.task.kind == "swe" else {}))
        assert hasattr(env, "verify")


def test_pass_rate_band():
    tasks = [Task(i, "terminal", "x") for i in ("easy", "hard", "mid", "new")]
    rewards = {"easy": [1, 1, 1, 1], "hard": [0, 0, 0, 0], "mid": [1, 0, 0, 1]}
    kept, dropped = pass_rate_band(tasks, rewards, lo=0.1, hi=0.9)
    assert [t.id for t in kept] == ["mid", "new"]
    assert dropped == {"too easy": 1, "too hard": 1}


def test_cli_export(tmp_path):
    trajs = [traj(["cat calc.py"], 1.0, "a"), traj(["git reflog"], 1.0, "b")]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in trajs))
    out = CliRunner().invoke(
        app,
        [
            "synth",
            "export",
            "--trajectories",
            str(tmp_path / "t.jsonl"),
            "--sft",
            str(tmp_path / "sft.jsonl"),
            "--tasks",
            str(FIXTURES / "terminal-bench"),
            "--rl",
            str(tmp_path / "rl.jsonl"),
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads(out.output)
    assert res["sft"]["kept"] == 1 and res["sft"]["dropped"] == {"exploit: git_history": 1}
    task_dirs = [d for d in (FIXTURES / "terminal-bench").iterdir() if d.is_dir()]
    assert len(task_dirs) >= 2 and res["rl"]["tasks"] == len(task_dirs)  # every task directory
    bad = CliRunner().invoke(app, ["synth", "export", "--rl", str(tmp_path / "x.jsonl")])
    assert bad.exit_code != 0 and "--rl needs --tasks" in str(bad.exception)
