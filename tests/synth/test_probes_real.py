"""Probes against weak verifiers as real tasks ship them: tiny Harbor task directories written
here, imported unmodified. One scenario throughout: sum the numbers in /app/data.txt into
/app/sum.txt (1 + 2 + 3 + 4 + 5 = 15). Each weak task relaxes one thing a real verifier gets
wrong (the answer left in git history or in a cache, only existence checked, a workspace
"expected" file or script trusted); `STRONG_HARBOR` keeps all of them and no probe flags it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arcforge.envs.importers import import_task_dir
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.rootfs import rootfs_blockers
from arcforge.synth.checktask import check_task_exploits
from arcforge.synth.probes import PROBES, oracle_outputs, run_probes, verifier_inputs
from arcforge.types import Task, Validation

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")

DATA = "printf '1\\n2\\n3\\n4\\n5\\n' > /app/data.txt\n"
# the oracle computes inline (no code file): hardcode_output does not apply to it
SOLVE = "cd /app && python3 -c \"print(sum(int(x) for x in open('data.txt')))\" > sum.txt\n"
REWARD = "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"
STRONG_VERIFY = f"grep -qx 15 /app/sum.txt {REWARD}"
CALC_BUG = "def add(a, b):\n    return a - b\n"


def git_repo_init(versions: list[str]) -> str:
    """init.sh lines: /app/calc.py committed once per version (the last one is HEAD)."""
    lines = ["cd /app && git init -q && git config user.email a@b && git config user.name a"]
    for i, body in enumerate(versions):
        lines += [
            f"printf '%s' '{body}' > calc.py",
            f"git add calc.py && git commit -qm v{i} --date='2024-01-0{i + 1}T00:00:00'",
        ]
    return "\n".join(lines) + "\n"


ADD_TEST = (
    "cd /app && python3 -c 'from calc import add; assert add(2, 3) == 5 and add(-4, 1) == -3' "
    + REWARD
)
ADD_FIX = "sed -i 's/return a [-*] b/return a + b/' /app/calc.py\n"

# name -> (init.sh, solve.sh, test.sh); rewrite mode (no Dockerfile): fast, no image build
HARBOR_WEAK: dict[str, tuple[str, str, str]] = {
    # HEAD multiplies, its parent subtracts, the first version adds: an older version is the fix
    "git_history": (
        git_repo_init(
            [
                "def add(a, b):\n    return a + b\n",
                CALC_BUG,
                "def add(a, b):\n    return a * b\n",
            ]
        ),
        ADD_FIX,
        ADD_TEST,
    ),
    # only checks that the output exists and is not empty
    "constant_output": (DATA, SOLVE, f"test -s /app/sum.txt {REWARD}"),
    # the image left a previous run's result in a cache directory
    "answer_in_workspace": (
        DATA + "mkdir -p /app/.cache/run-17 && echo 15 > /app/.cache/run-17/total\n",
        SOLVE,
        STRONG_VERIFY,
    ),
    # compares with an expected file the agent can write
    "edit_inputs": (
        DATA + "echo 15 > /app/expected.txt\n",
        SOLVE,
        f"diff -q /app/sum.txt /app/expected.txt {REWARD}",
    ),
}
STRONG_HARBOR = (DATA + git_repo_init([CALC_BUG]), SOLVE, STRONG_VERIFY)


def harbor_dir(root: Path, init: str, solve: str, test: str, dockerfile: str = "") -> Path:
    for d in ("environment", "solution", "tests"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 60\n')
    (root / "instruction.md").write_text("Write the sum of /app/data.txt to /app/sum.txt.\n")
    (root / "environment" / "init.sh").write_text(init)
    if dockerfile:
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    (root / "solution" / "solve.sh").write_text(solve)
    (root / "tests" / "test.sh").write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + test)
    return root


@pytest.mark.parametrize("name", list(HARBOR_WEAK))
def test_weak_harbor_verifier_is_caught_by_its_probe(name, tmp_path):
    task = import_task_dir(harbor_dir(tmp_path / name, *HARBOR_WEAK[name]))
    res = check_task_exploits(task, runs=1, probes=[name])
    assert res["oracle"] and not res["empty"], res  # a working task, only its verifier is weak
    assert res["probes"] == {name: True} and not res["accepted"], res


def test_git_history_tries_older_versions_until_one_passes(tmp_path):
    task = import_task_dir(harbor_dir(tmp_path / "g", *HARBOR_WEAK["git_history"]))
    res = run_probes(task, ["git_history"])["git_history"]
    # candidates newest first: v1 (subtracts) fails, v0 (adds) passes on the second attempt
    assert res.fooled and "attempt 2" in res.detail, res


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_strong_harbor_task_is_not_flagged(tmp_path):
    task = import_task_dir(harbor_dir(tmp_path / "strong", *STRONG_HARBOR))
    res = check_task_exploits(task, runs=1)
    assert res["accepted"], res["reasons"]
    assert set(res["probes"]) == set(PROBES) and not any(res["probes"].values())
    # the output probes really ran (the oracle wrote sum.txt); hardcode needs oracle code
    assert "constant_output" not in res["not_applicable"]
    assert "answer_in_workspace" not in res["not_applicable"]
    assert "hardcode_output" in res["not_applicable"]


def test_verifier_inputs_name_workspace_files_not_tests():
    task = Task(
        "t",
        "terminal",
        "x",
        validation=Validation(
            verify_script="bash /workspace/scripts/compare.sh && pytest /grading/tests\n"
        ),
        metadata={"test_files": {"test_x.py": "open('/app/expected.json'); 'conftest.py'"}},
    )
    assert verifier_inputs(task) == ["/app/expected.json", "/workspace/scripts/compare.sh"]


needs_rootfs = pytest.mark.skipif(bool(rootfs_blockers()), reason="; ".join(rootfs_blockers()))


@needs_rootfs
def test_container_task_outputs_outside_the_workspace_are_hardcoded(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCFORGE_TASK_ROOT", "auto")
    # the oracle writes a program and its result to /root/out; the verifier reads only the result
    solve = (
        "cat > /app/summer.py <<'EOF'\nprint(sum(int(x) for x in open('/app/data.txt')))\nEOF\n"
        "mkdir -p /root/out && python3 /app/summer.py > /root/out/sum.txt\n"
    )
    root = harbor_dir(
        tmp_path / "rooted",
        DATA,
        solve,
        f"grep -qx 15 /root/out/sum.txt {REWARD}",
        dockerfile="FROM python:3.11-slim-bookworm\nWORKDIR /app\n",
    )
    task = import_task_dir(root)
    assert "rootfs_image" in task.context, task.metadata["unsupported"]
    score, files = oracle_outputs(task)
    assert score == 1.0 and files.wrote_code
    assert files == {"/root/out/sum.txt": b"15\n"}, files  # the program is code: not written
    res = run_probes(task, ["hardcode_output", "constant_output"])
    assert res["hardcode_output"].fooled and not res["constant_output"].fooled, res
