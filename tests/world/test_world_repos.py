"""Repos and bugs, SWE-bench style: the agent's repo lacks the tests the bug fails, hidden
FAIL_TO_PASS tests over fresh inputs fail under the bug and pass after the fix (real pytest and
git confirm it), and the issue reports a call no graded test makes."""

import ast
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

from fixture_sources import DOUBLE_BUMP_COMBO

from arcforge.world.code.bugtests import passes
from arcforge.world.code.codelib import call_repr, load_source
from arcforge.world.code.mutations import KINDS
from arcforge.world.code.repos import Repo
from arcforge.world.code.repos import TestCase as Case
from arcforge.world.tasks.pools import swe_tasks


def _pytest(root: Path) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.returncode, out.stdout


def _asserts(text: str) -> dict[str, tuple[str, str]]:
    """{test name: (call, expected)} of a generated test file."""
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            cmp = node.body[0].test  # assert <call> == <expected>
            out[node.name] = (ast.unparse(cmp.left), ast.unparse(cmp.comparators[0]))
    return out


def _namespace(source: str) -> dict | None:
    try:
        return load_source(source)
    except Exception:  # noqa: BLE001 - a mutant may not import: every test of it fails
        return None


def test_clean_repos_pass_in_process(world):
    for repo in world.repos:
        results = repo.run_tests()
        assert len(results) >= 6 and all(results.values()), repo.name


def test_every_bug_has_hidden_fail_to_pass_tests_and_the_fix_passes_them(world):
    rng = random.Random(0)
    kinds = Counter()
    for repo in world.repos:
        for _ in range(8):
            bug = repo.inject_bug(rng)
            kinds[bug.kind] += 1
            ((tpath, hidden),) = bug.hidden_tests.items()
            assert tpath == f"tests/test_{Path(bug.path).stem}.py"
            broken, fixed = _namespace(bug.mutated), load_source(bug.original)
            tests = _asserts(hidden)
            assert 1 <= len(bug.fail_to_pass) <= 3
            for node in bug.fail_to_pass:  # in the hidden file, failing under the bug only
                call, want = tests[node.split("::")[1]]
                assert not passes(broken, call, want) and passes(fixed, call, want), node
            visible = repo.run_tests({bug.path: bug.mutated})
            assert sorted(bug.removed_tests) == sorted(n for n, ok in visible.items() if not ok)
            workspace = repo.workspace_tests(bug.removed_tests)
            for node in bug.pass_to_pass:
                path, name = node.split("::")
                if node in visible:  # a visible test the agent's repo keeps
                    assert visible[node] and f"def {name}(" in workspace[path]
                else:  # a hidden one passing with and without the bug
                    assert passes(broken, *tests[name]) and passes(fixed, *tests[name])
            for node in [*bug.fail_to_pass, *bug.removed_tests]:
                assert f"def {node.split('::')[1]}(" not in workspace[tpath]
            # the issue's call is none of the graded tests' nor the visible tests' calls
            graded = {tests[n.split("::")[1]][0] for n in bug.fail_to_pass}
            assert bug.issue_call not in graded | {c.call for c in repo.cases}
            assert f"`{bug.issue_call}`" in bug.issue_text
            assert call_repr(fixed, bug.issue_call) in bug.issue_text
            assert bug.fix_diff.startswith(f"diff --git a/{bug.path}")
    assert len(kinds) >= 8, kinds  # kinds are drawn about evenly, not by how many sites


def test_real_pytest_on_base_hidden_tests_and_fix(world, tmp_path):
    for i, task in enumerate(world.tasks("swe", "train")[:2]):
        repo = next(r for r in world.repos if r.name == task.context["repo"])
        clean = tmp_path / f"c{i}"
        repo.materialize(clean, git=False)
        assert _pytest(clean)[0] == 0  # clean repo passes
        bug = repo.inject_bug(random.Random(i))
        root = tmp_path / f"r{i}"
        repo.materialize(root, git=False, bug=bug)
        assert _pytest(root)[0] == 0  # the base keeps only tests that pass under the bug
        hidden = set(bug.hidden_tests)
        for rel, text in bug.hidden_tests.items():
            (root / rel).write_text(text)
        code, out = _pytest(root)
        assert code == 1 and hidden
        for node in bug.fail_to_pass:
            assert f"FAILED {node}" in out
        for node in bug.pass_to_pass:
            assert f"PASSED {node}" in out
        (root / "fix.diff").write_text(bug.fix_diff)
        subprocess.run(["git", "apply", "fix.diff"], cwd=root, check=True)
        (root / "fix.diff").unlink()
        code, out = _pytest(root)
        assert code == 0 and all(f"PASSED {n}" in out for n in bug.fail_to_pass)


def test_git_history(world, tmp_path):
    repo = world.repos[0]
    bug = repo.inject_bug(random.Random(1))
    shas = repo.materialize(tmp_path, git=True, bug=bug)
    assert len(shas) == 3
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert log[2] == "Initial commit" and "fixes #1" in log[0]

    def show(sha: str, path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{sha}:{path}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert show(shas[1], bug.path) == bug.mutated
    ((tpath, hidden),) = bug.hidden_tests.items()
    base_tests = show(shas[1], tpath)
    assert all(n.split("::")[1] not in base_tests for n in bug.fail_to_pass)  # as SWE-bench
    assert show(shas[2], tpath) == hidden and (tmp_path / bug.path).read_text() == bug.original


def test_issue_text_reports_a_real_symptom(world):
    for task in world.tasks("swe", "train") + world.tasks("swe", "test"):
        text = task.instruction
        assert "Calling `" in text and "was expected" in text
        hidden = json.loads(task.validation.tests)
        assert set(hidden) == {n.split("::")[0] for n in task.validation.fail_to_pass}
        # the graded test files and the oracle never sit where the environment reads input
        assert not {"hidden_tests", "original", "fix_diff"} & set(task.context["bug"])


HELPERS = '"""Numbers."""\n\n\n' + DOUBLE_BUMP_COMBO


def _helpers_repo() -> Repo:
    ns = load_source(HELPERS)
    cases, body = [], ["from nums.ops import bump, combo, double\n"]
    for fn in ("double", "bump", "combo"):
        for i, x in enumerate((3, 10)):
            call = f"{fn}({x})"
            cases.append(Case("tests/test_ops.py", f"test_{fn}_{i}", call, call_repr(ns, call)))
            body.append(f"\ndef test_{fn}_{i}():\n    assert {call} == {call_repr(ns, call)}\n")
    probes = {fn: [f"{fn}({x})" for x in (0, 1, 2, 5, 7, 12)] for fn in ("double", "bump", "combo")}
    return Repo(
        "nums",
        "nums",
        {"nums/__init__.py": "", "nums/ops.py": HELPERS},
        {"tests/test_ops.py": "\n".join(body)},
        "numbers",
        cases,
        probe_calls=probes,
    )


def test_cross_function_bugs_and_bugs_seen_through_a_caller():
    repo = _helpers_repo()
    bug = repo.inject_bug(random.Random(0), ["cross_function"])
    assert bug.kind == "cross_function" and bug.function == "combo"
    assert "double" in bug.detail and "bump" in bug.detail
    through = []
    for seed in range(40):
        bug = repo.inject_bug(random.Random(seed))
        if bug.issue_function != bug.function:
            through.append(bug)
            # the bug is in a helper; the issue and at least one graded test are on the caller
            assert bug.issue_function == "combo" and bug.function in ("double", "bump")
    assert through


def test_fresh_inputs_come_from_perturbed_calls_without_probe_calls():
    repo = _helpers_repo()
    repo.probe_calls = {}
    bug = repo.inject_bug(random.Random(2), ["operator_swap"])
    (hidden,) = bug.hidden_tests.values()
    visible = {c.call for c in repo.cases}
    calls = [call for call, _ in _asserts(hidden).values()]
    new = [c for c in calls if c not in visible]
    assert new and bug.issue_call not in visible


def test_held_out_bugs_take_every_kind_in_turn(world):
    """With the held-out repos able to give them, the test split holds every kind, evenly."""
    _, test = swe_tasks(random.Random(3), world.repos, len(world.repos), 0, 2 * len(KINDS))
    kinds = Counter(t.metadata["bug_kind"] for t in test)
    assert len(test) == 2 * len(KINDS)
    assert max(kinds.values()) - min(kinds.values()) <= 2  # a rare kind fails in some repos
    assert len(kinds) >= 10, kinds
    # distinct fixes first: held-out bugs do not share a fixed function while others exist
    fixes = [t.metadata["fixed"] for t in test]
    assert len(set(fixes)) >= min(len(fixes), 12)
