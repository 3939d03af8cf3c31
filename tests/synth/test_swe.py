"""SWE synthesis end to end on real git repositories, validated in the bwrap sandbox.

Acceptance: every exported instance, loaded back through the SWE environment, passes with its
fix (every F2P and P2P test) and fails without it (every F2P test). Repositories: one built
here commit by commit (swe_repo.py), and the `six` sdist from PyPI (pip download, cached in
~/.cache/arcforge-test-pypi; skipped with pip's error when the registry is unreachable) put under
git with a planted regression and its fix.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcforge.cli import app
from arcforge.envs.check import check_task
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.synth.swe import SWESynthConfig, synthesize_bugs, synthesize_from_repo

sys.path.insert(0, str(Path(__file__).parent))
from swe_repo import build_repo, commit, git  # noqa: E402

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def assert_instances_hold(path: Path, tmp: Path) -> list[dict]:
    """With the fix every F2P and P2P test passes; without it every F2P test fails."""
    instances = [json.loads(x) for x in path.read_text().splitlines()]
    for inst in instances:  # SWE-bench's schema: the test lists are JSON-encoded strings
        inst["FAIL_TO_PASS"] = json.loads(inst["FAIL_TO_PASS"])
        inst["PASS_TO_PASS"] = json.loads(inst["PASS_TO_PASS"])
    for i, inst in enumerate(instances):
        one = tmp / f"inst{i}.jsonl"
        one.write_text(json.dumps(inst) + "\n")
        fixed = check_task(one)
        d = fixed["details"]
        assert fixed["reward"] == 1.0, (inst["instance_id"], d)
        assert d["f2p"] == {"passed": len(inst["FAIL_TO_PASS"]), "total": len(inst["FAIL_TO_PASS"])}
        assert d["p2p"]["passed"] == d["p2p"]["total"] == len(inst["PASS_TO_PASS"])
        broken = check_task(one, empty=True)
        assert broken["reward"] == 0.0 and broken["details"]["f2p"]["passed"] == 0, broken
    return instances


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("swe")
    repo = build_repo(root)
    recs, path = synthesize_from_repo(repo, root / "out", SWESynthConfig(runs=3, workers=2))
    return root, repo, recs, path


def test_fix_commits_become_instances(built):
    root, repo, recs, path = built
    by_msg = {r.data["problem_statement"].splitlines()[0]: r.data for r in recs}
    assert sorted(by_msg) == ["Add median", "Fix clamp above the range"]
    clamp = by_msg["Fix clamp above the range"]
    assert clamp["FAIL_TO_PASS"] == ["tests/test_ops.py::test_clamp_above"]
    assert sorted(clamp["PASS_TO_PASS"]) == [
        f"tests/test_ops.py::test_{n}"
        for n in ("clamp_below", "clamp_inside", "mean", "word_count")
    ]
    assert "tests/" not in clamp["patch"] and "mathlib/ops.py" not in clamp["test_patch"]
    assert sorted(by_msg["Add median"]["FAIL_TO_PASS"]) == [
        "tests/test_median.py::test_median_even",
        "tests/test_median.py::test_median_odd",
    ]
    summary = json.loads((root / "out" / "summary.json").read_text())
    validate = summary["steps"][0]
    assert (validate["in"], validate["out"]) == (4, 2)  # docs commit is not a candidate
    assert validate["dropped"] == {"no FAIL_TO_PASS test": 2}
    journal = [json.loads(x) for x in (root / "out" / "validate.jsonl").read_text().splitlines()]
    details = sorted(e.get("detail", "") for e in journal if e["dropped"])
    firsts = sorted(d.splitlines()[0].split(", ")[-1] for d in details)
    assert firsts == ["0 flaky", "1 flaky"]  # refactor, flaky
    assert all("--- without it:" in d for d in details)  # pytest's output explains the drop
    inst = json.loads(path.read_text().splitlines()[0])
    assert {
        "instance_id",
        "repo",
        "base_commit",
        "patch",
        "test_patch",
        "problem_statement",
        "FAIL_TO_PASS",
        "PASS_TO_PASS",
        "repo_path",
    } <= set(inst)


def test_exported_instances_hold_with_and_without_the_fix(built, tmp_path):
    assert len(assert_instances_hold(built[3], tmp_path)) == 2


def test_rerun_resumes_and_cli_reports_counts(built):
    root, repo, recs, path = built
    before = path.read_text()
    out = CliRunner().invoke(app, ["synth", "swe", "--repo", str(repo), "--out", str(root / "out")])
    assert out.exit_code == 0, out.output
    res = json.loads(out.output.strip().splitlines()[-1])
    assert res["instances"] == 2 and res["steps"]["validate"]["dropped"] == {
        "no FAIL_TO_PASS test": 2
    }
    assert path.read_text() == before  # nothing re-run, nothing duplicated
    summary = json.loads((root / "out" / "summary.json").read_text())
    assert summary["steps"][0]["resumed"] == 4
    bad = CliRunner().invoke(app, ["synth", "swe", "--repo", str(root), "--out", str(root / "x")])
    assert bad.exit_code != 0 and "not a git repository" in str(bad.exception)


def test_swebench_records_route(built, tmp_path):
    root, repo, recs, path = built
    inst = [json.loads(x) for x in path.read_text().splitlines()][1]  # "Add median"
    rec = {k: inst[k] for k in ("instance_id", "base_commit", "patch", "test_patch")}
    rec["problem_statement"] = "median() is missing"
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(rec) + "\n")
    out, _ = synthesize_from_repo(repo, tmp_path / "o", SWESynthConfig(runs=1), records)
    assert [r.id for r in out] == [inst["instance_id"]]
    assert sorted(out[0].data["FAIL_TO_PASS"]) == sorted(json.loads(inst["FAIL_TO_PASS"]))
    assert out[0].data["problem_statement"] == "median() is missing"


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_synthetic_bugs_break_tests_and_hold(built, tmp_path):
    root, repo, _, _ = built
    recs, path = synthesize_bugs(repo, tmp_path / "bugs", SWESynthConfig(runs=2, max_bugs=3))
    assert len(recs) >= 2
    kinds = {r.data["mutation"]["kind"] for r in recs}
    assert len(kinds) >= 2, kinds
    for r in recs:
        assert r.data["test_patch"] == "" and r.data["FAIL_TO_PASS"]
        assert all(t in r.data["problem_statement"] for t in r.data["FAIL_TO_PASS"])
        assert r.data["mutation"]["original"] in r.data["patch"]
    assert_instances_hold(path, tmp_path)
    refs = subprocess.run(
        ["git", "for-each-ref", "refs/arcforge/bugs"],
        cwd=tmp_path / "bugs" / "repo.git",
        capture_output=True,
        text=True,
    ).stdout
    assert len(refs.splitlines()) == len(recs)  # kept mutants only; the user's repo untouched
    assert (
        "arcforge"
        not in subprocess.run(
            ["git", "for-each-ref"], cwd=repo, capture_output=True, text=True
        ).stdout
    )


SIX_BUG = (
    "    if isinstance(s, text_type):\n        return s.encode(encoding, errors)",
    "    if isinstance(s, text_type):\n        return s.encode(encoding)",
)
SIX_TEST = """

def test_ensure_binary_honours_errors():
    assert six.ensure_binary(u"caf\\xe9", "ascii", "replace") == b"caf?"
"""


def _pypi_six(cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob("six-*.tar.gz"))
    if not found:
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "six==1.17.0",
                "-d",
                str(cache),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        found = sorted(cache.glob("six-*.tar.gz"))
        if not found:
            pytest.skip(f"pip could not download six: {res.stderr.strip()[-300:]}")
    return found[0]


@pytest.mark.slow  # over 10 s: `make test-all` runs it (make test stays under 10 minutes)
def test_real_pypi_package_with_a_planted_fix(tmp_path):
    sdist = _pypi_six(Path.home() / ".cache" / "arcforge-test-pypi")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    repo = next(tmp_path.glob("six-*"))
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {}, "six 1.17.0 from PyPI")
    six_py = (repo / "six.py").read_text()
    assert SIX_BUG[0] in six_py
    commit(repo, {"six.py": six_py.replace(*SIX_BUG)}, "Simplify ensure_binary")  # regression
    test = (repo / "test_six.py").read_text() + SIX_TEST
    commit(repo, {"six.py": six_py, "test_six.py": test}, "ensure_binary ignored errors=")
    recs, path = synthesize_from_repo(repo, tmp_path / "out", SWESynthConfig(runs=3))
    assert len(recs) == 1
    assert recs[0].data["FAIL_TO_PASS"] == ["test_six.py::test_ensure_binary_honours_errors"]
    assert len(recs[0].data["PASS_TO_PASS"]) > 100  # six's own suite, unaffected by the bug
    assert_instances_hold(path, tmp_path)


def test_llm_rewrites_problem_statements(built, tmp_path):
    from arcforge.llm import LLMClient
    from arcforge.replay import ReplayServer

    root, repo, recs, _ = built
    out = tmp_path / "llm"
    out.mkdir()
    shutil.copy(root / "out" / "validate.jsonl", out / "validate.jsonl")  # validation resumes
    issue = "<think>describe the symptom</think>clamp(15, 0, 10) returns 0; expected 10."
    with ReplayServer([issue, "median() does not exist"]) as srv:
        cfg = SWESynthConfig(llm=LLMClient(srv.base_url, "replay"), workers=1)
        got, _ = synthesize_from_repo(repo, out, cfg)
        prompts = [r["messages"][0]["content"] for r in srv.requests]
    assert len(prompts) == 2  # one rewrite per instance, no sandbox re-run
    assert "Fix clamp above the range" in prompts[0] and "test_clamp_above" in prompts[0]
    by_id = {r.id: r.data for r in got}
    clamp = next(d for d in by_id.values() if d["original_statement"].startswith("Fix clamp"))
    assert clamp["problem_statement"] == "clamp(15, 0, 10) returns 0; expected 10."


def test_statement_rewrite_guard_names_what_is_wrong():
    from arcforge.synth.swe import statement_problem

    orig = "`is_prime` gives a wrong result\n\nCalling `is_prime(7)` (from `pkg/numbers.py`) returns False."
    f2p = ["tests/test_numbers.py::test_is_prime_small[7]"]
    patch = "--- a/pkg/numbers.py\n+++ b/pkg/numbers.py\n-    return n % 2 == 1\n+    return all(n % d for d in range(2, n))\n"
    good = "is_prime(7) says False although 7 is a prime; it should say True."
    assert statement_problem(orig, good, f2p, patch) is None
    assert statement_problem(orig, "Answer: 170", f2p, patch) == "too short"
    assert (
        statement_problem(orig, "The numbers module gives wrong answers for primes.", f2p, patch)
        == "lost the code names"
    )
    assert (
        statement_problem(orig, "is_prime fails; see test_is_prime_small for details.", f2p, patch)
        == "names a FAIL_TO_PASS test"
    )
    leak = "is_prime is wrong, change it to return all(n % d for d in range(2, n))"
    assert statement_problem(orig, leak, f2p, patch) == "quotes the fix"
