"""`swebench:<file.jsonl>` on the instances `arcforge synth swe --commits` writes from the SWE
synthesis tests' repository (tests/synth/swe_repo.py: "Fix clamp above the range", "Add
median"): an agent that applies each gold patch through the bash tool scores 1, one that does
nothing scores 0, the empty-patch baseline is 0, and the verdict is the official swebench
package's resolution status.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcforge.cli import app
from arcforge.errors import UserError
from arcforge.eval.external import open_suite
from arcforge.eval.external.swebench import SCAFFOLD, official_verdict
from arcforge.sandbox.bwrap import bwrap_available

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "synth"))
from swe_repo import build_repo  # noqa: E402

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def instances(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("swebench")
    repo = build_repo(root)
    log = subprocess.run(
        ["git", "log", "--reverse", "--format=%H"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    args = ["synth", "swe", "--repo", str(repo), "--commits", f"{log[0]}..{log[-1]}"]
    res = CliRunner().invoke(app, [*args, "--out", str(root / "out"), "--runs", "1"])
    assert res.exit_code == 0, res.output
    return root / "out" / "instances.jsonl"


class AppliesTheGoldPatch:
    """Turn 1: write the instance's gold patch and `git apply` it with bash; turn 2: done."""

    def __init__(self, path: Path) -> None:
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        self.patches = {r["problem_statement"].strip(): r["patch"] for r in recs}

    def __call__(self, messages, tools=None):
        assert {"bash", "edit_file", "run_tests"} <= {t["function"]["name"] for t in tools}
        if messages[-1]["role"] == "tool":
            assert "error" not in messages[-1]["content"], messages[-1]["content"]
            return {"role": "assistant", "content": "Fixed.", "tool_calls": None}
        user = next(m["content"] for m in messages if m["role"] == "user")
        patch = next(p for s, p in self.patches.items() if s in user)
        cmd = (
            f"cat > .gold.diff <<'EOF_GOLD'\n{patch}EOF_GOLD\ngit apply .gold.diff && rm .gold.diff"
        )
        call = {"id": "c1", "type": "function"}
        call["function"] = {"name": "bash", "arguments": json.dumps({"command": cmd})}
        return {"role": "assistant", "content": "", "tool_calls": [call]}


def does_nothing(messages, tools=None):
    return {"role": "assistant", "content": "Nothing to do.", "tool_calls": None}


def test_official_grading_of_environment_statuses():
    f2p, p2p = ["t.py::a"], ["t.py::b", "t.py::c"]
    assert official_verdict({"not_passed": {}}, f2p, p2p)["resolution"] == "RESOLVED_FULL"
    bad = {"not_passed": {"t.py::a": "failed"}}
    assert official_verdict(bad, f2p, p2p)["resolution"] == "RESOLVED_NO"
    missing = {"not_passed": {"t.py::a": "missing"}}
    assert official_verdict(missing, f2p, p2p)["resolution"] == "RESOLVED_NO"
    # SWE-bench: a skipped PASS_TO_PASS test is maintained, a skipped FAIL_TO_PASS one is not
    assert official_verdict({"not_passed": {"t.py::b": "skipped"}}, f2p, p2p)["resolution"] == (
        "RESOLVED_FULL"
    )
    skipped_f2p = {"not_passed": {"t.py::a": "skipped"}}
    assert official_verdict(skipped_f2p, f2p, p2p)["resolution"] == "RESOLVED_NO"


def test_bad_names_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="not a file"):
        open_suite(f"swebench:{tmp_path / 'none.jsonl'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"repo": "x"}\n')
    with pytest.raises(UserError, match="no instance_id"):
        open_suite(f"swebench:{bad}")


@needs_bwrap
@pytest.mark.slow  # ~30 s: synthesis of the instances, then three runs over both
def test_gold_patch_scores_1_and_doing_nothing_scores_0(instances):
    name = f"swebench:{instances}?turns=3"
    res = open_suite(name).run(AppliesTheGoldPatch(instances))
    assert len(res.items) == 2 and not res.meta["skipped"], res.meta["skipped"]
    assert res.score == 1.0, {i.id: i.detail for i in res.items}
    assert all(i.detail["attempt"]["resolution"] == "RESOLVED_FULL" for i in res.items)
    assert res.baselines == {"empty_patch": 0.0} and res.meta["scaffold"] == SCAFFOLD
    assert res.meta["grading"].startswith("swebench ")
    idle = open_suite(name + "&baseline=0").run(does_nothing)
    assert idle.score == 0.0 and len(idle.items) == 2
    assert all(i.detail["attempt"]["resolution"] == "RESOLVED_NO" for i in idle.items)
    # an instance without its clone is skipped with the reason, not scored
    rec = json.loads(instances.read_text().splitlines()[0])
    orphan = instances.parent / "orphan.jsonl"
    orphan.write_text(json.dumps({k: v for k, v in rec.items() if k != "repo_path"}) + "\n")
    res = open_suite(f"swebench:{orphan}").run(does_nothing)
    assert res.items == [] and "no local clone" in res.meta["skipped"][rec["instance_id"]][0]
