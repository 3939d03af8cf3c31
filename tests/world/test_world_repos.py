"""Repos and bugs: every injected bug breaks a test; real pytest and git confirm the fix."""

import random
import subprocess
import sys
from pathlib import Path

from arcforge.world.repos import BUG_KINDS


def _pytest(root: Path) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"],
                         cwd=root, capture_output=True, text=True, timeout=120)  # fmt: skip
    return out.returncode, out.stdout


def test_clean_repos_pass_in_process(world):
    for repo in world.repos:
        results = repo.run_tests()
        assert len(results) >= 6 and all(results.values()), repo.name


def test_every_bug_breaks_a_test_and_fix_restores(world):
    rng = random.Random(0)
    kinds = set()
    for repo in world.repos:
        for _ in range(6):
            bug = repo.inject_bug(rng)
            kinds.add(bug.kind)
            broken = repo.run_tests({bug.path: bug.mutated})
            assert bug.fail_to_pass and all(not broken[n] for n in bug.fail_to_pass)
            assert all(broken[n] for n in bug.pass_to_pass)
            assert all(repo.run_tests({bug.path: bug.original}).values())
            assert bug.fix_diff.startswith(f"diff --git a/{bug.path}")
    assert kinds == set(BUG_KINDS)


def test_real_pytest_on_base_and_after_fix(world, tmp_path):
    for i, task in enumerate(world.tasks("swe", "train")[:2]):
        repo = next(r for r in world.repos if r.name == task.context["repo"])
        bug = task.context["bug"]
        root = tmp_path / f"r{i}"
        repo.materialize(root, git=False)
        assert _pytest(root)[0] == 0  # clean repo passes
        (root / bug["path"]).write_text(bug["mutated"])
        code, out = _pytest(root)
        assert code == 1
        for node in task.validation.fail_to_pass:
            assert f"FAILED {node}" in out
        for node in task.validation.pass_to_pass:
            assert f"PASSED {node}" in out
        patch = root / "fix.diff"
        patch.write_text(task.metadata["patch"])
        subprocess.run(["git", "apply", "fix.diff"], cwd=root, check=True)
        patch.unlink()
        assert _pytest(root)[0] == 0


def test_git_history(world, tmp_path):
    repo = world.repos[0]
    bug = repo.inject_bug(random.Random(1))
    shas = repo.materialize(tmp_path, git=True, bug=bug)
    assert len(shas) == 3
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.splitlines()  # fmt: skip
    assert log[2] == "Initial commit" and "fixes #1" in log[0]
    base = subprocess.run(["git", "show", f"{shas[1]}:{bug.path}"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert base == bug.mutated
    assert (tmp_path / bug.path).read_text() == bug.original


def test_issue_text_reports_a_real_symptom(world):
    for task in world.tasks("swe", "train") + world.tasks("swe", "test"):
        text = task.instruction
        assert "Calling `" in text and "was expected" in text
