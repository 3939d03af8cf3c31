"""Exploit probes and check-task on real sandboxed tasks: each deliberately weak verifier (see
weak_tasks.py) is rejected naming the one probe that fools it; strong ones are accepted; the
CLI prints the JSON verdict for a Harbor directory. The full probe x task matrix is slow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcforge.cli import app
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.synth.checktask import check_task_exploits
from arcforge.synth.probes import PROBES, hidden_snippets, run_probes
from arcforge.types import Task

sys.path.insert(0, str(Path(__file__).parent))
from weak_tasks import FIX, STRONG, STRONG_TASKS, TEST, WEAK  # noqa: E402

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def test_every_probe_has_a_weak_task():
    from test_probes_real import HARBOR_WEAK

    assert set(WEAK) | set(HARBOR_WEAK) == set(PROBES)


@pytest.mark.parametrize("name", list(WEAK))
def test_weak_verifier_is_rejected_naming_its_probe(name):
    res = check_task_exploits(WEAK[name], runs=1, probes=[name])
    assert res["oracle"] and not res["empty"], res  # a working task, only its verifier is weak
    assert res["probes"] == {name: True} and not res["accepted"]
    assert res["reasons"] and res["reasons"][0].startswith(f"probe {name} fooled the verifier")


@pytest.mark.parametrize("name, runs", [("strong_tests", 1), ("strong_program", 2)])
def test_strong_verifier_is_accepted(name, runs):
    res = check_task_exploits(STRONG_TASKS[name], runs=runs)
    assert res["accepted"], res["reasons"]
    assert res["stability"] == {"oracle_passes": runs, "empty_fails": runs, "runs": runs}
    assert set(res["probes"]) == set(PROBES) and not any(res["probes"].values()), res
    if name == "strong_program":  # its oracle writes code, so hardcode_output really ran
        assert "hardcode_output" not in res["not_applicable"]


@pytest.mark.slow
def test_full_matrix_each_weak_task_falls_to_exactly_one_probe():
    for name, task in WEAK.items():
        fooled = sorted(n for n, r in run_probes(task, list(WEAK)).items() if r.fooled)
        assert fooled == [name], (name, fooled)


def test_unstable_and_unsupported_tasks_name_why():
    flaky = Task(
        "flaky",
        "terminal",
        "x",
        validation=STRONG_TASKS["strong_tests"].validation,
        context={"files": {"calc.py": "def add(a, b):\n    return a + b\n"}},
        metadata={"solution": FIX, "test_files": {"test_calc.py": TEST}},
    )
    res = check_task_exploits(flaky, runs=1, probes=[])
    assert res["oracle"] and res["empty"] and not res["accepted"]
    assert res["reasons"] == ["the empty solution passed 1/1 runs"]
    odd = Task("odd", "terminal", "x", metadata={"solution": "true", "unsupported": ["no gpu"]})
    assert check_task_exploits(odd)["reasons"] == ["unsupported here: no gpu"]
    with pytest.raises(ValueError, match="supports terminal and swe"):
        check_task_exploits(Task("m", "math", "1+1"))


def test_hidden_snippets_pick_distinctive_lines():
    snippets = hidden_snippets(WEAK["read_hidden_tests"])
    assert "assert add(-4, 1) == -3" in snippets and "from calc import add" not in snippets
    patch = (
        "+++ b/tests/test_a.py\n+    assert parse('x,y') == ['x', 'y']\n context_line_long_enough\n"
    )
    swe = Task("s", "swe", "x", metadata={"test_patch": patch})
    assert hidden_snippets(swe) == ["assert parse('x,y') == ['x', 'y']"]


def _harbor_dir(root: Path, verify: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "solution").mkdir()
    (root / "environment").mkdir()
    (root / "task.toml").write_text('version = "1.0"\n[metadata]\ndifficulty = "easy"\n')
    (root / "instruction.md").write_text("Fix add() in /app/calc.py.\n")
    (root / "environment" / "init.sh").write_text(
        "printf 'def add(a, b):\\n    return a - b\\n' > /app/calc.py\n"
    )
    (root / "solution" / "solve.sh").write_text(FIX.replace("/workspace", "/app"))
    (root / "tests" / "test_calc.py").write_text(TEST)
    (root / "tests" / "test.sh").write_text(verify)
    return root


def test_cli_check_task_on_harbor_dirs(tmp_path):
    reward = "\n[ $? -eq 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
    good = "export PYTHONPATH=$PYTHONPATH:/app\ncd /app\npytest -q /tests/test_calc.py" + reward
    weak = "cd /app && python3 -m pytest -q /tests/test_calc.py | grep -q passed" + reward
    runner = CliRunner()
    for name, verify, accepted in [("good", good, True), ("weak", weak, False)]:
        root = _harbor_dir(tmp_path / name, verify)
        out = runner.invoke(
            app, ["synth", "check-task", str(root), "--runs", "1", "--probes", "fake_output"]
        )
        assert out.exit_code == 0, out.output
        res = json.loads(out.output[out.output.index("{") :])
        assert res["accepted"] is accepted, res
        assert res["probes"] == {"fake_output": not accepted}
    bad = runner.invoke(app, ["synth", "check-task", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "task not found" in str(bad.exception or bad.output)


def test_strong_pattern_is_what_the_weak_tasks_relax():
    # guard against the fixtures drifting: the strong verifier keeps all four guards
    for guard in ("-P", "-c /grading/pytest.ini", "--noconftest", "/grading/tests"):
        assert guard in STRONG
