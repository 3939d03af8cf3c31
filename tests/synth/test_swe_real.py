"""SWE instances from a real-shaped repository: a `src/` layout with a test extra, installed per
environment, in SWE-bench's schema, graded by `env check`, accepted by the official package.

The repository is built here with git (fixed dates, so its commits and the cached environment
are the same on every run):
  C0 initial      pyproject (flit, version 1.4.2, extra test = [six]), src/tinylib, tests/
  C1 "(#12)"      clamp fix + a new test in tests/test_core.py            -> instance, F2P 1
  C2 docs         README only                                             -> dropped, no tests
  C3 "(#13)"      add fix + a new case in tests/helpers.py only (shared)  -> instance, F2P 1
  C4 dep          code + a test importing a module nobody installs        -> dropped, output kept
The environment install needs the package index (flit_core, six, pytest); without it the tests
that need it skip with pip's error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import swe_repo
from fixture_sources import BUGGY_CLAMP, CLAMP_DOC
from typer.testing import CliRunner

from arcforge.cli import app
from arcforge.envs.check import check_task
from arcforge.envs.swe_venv import EnvBuildError, InstallSpec, detect_install, ensure_env
from arcforge.sandbox import Limits
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.execution import limits_prefix
from arcforge.synth.swe_meta import helper_test_files, package_version, pr_number, repo_slug

PYPROJECT = """[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "tinylib"
version = "1.4.2"
description = "tiny"

[project.optional-dependencies]
test = ["six", "pytest"]
"""
LIB = f'''"""tinylib."""


{BUGGY_CLAMP.replace(CLAMP_DOC, "")}

def add(a, b):
    return abs(a) + b
'''
HELPERS = "CASES = [(1, 2, 3), (0, 5, 5)]\n"
TEST_CORE = """import threading

import six

import tinylib


def test_imports_from_the_workspace():
    assert tinylib.__file__.startswith("/workspace/src/"), tinylib.__file__
    assert six.PY3


def test_clamp_below():
    assert tinylib.clamp(-1, 0, 9) == 0


def test_threads():
    out = []
    ts = [threading.Thread(target=lambda: out.append(bytearray(1 << 20))) for _ in range(100)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == 100
"""
CLAMP_TEST = """

def test_clamp_above():
    assert tinylib.clamp(15, 0, 9) == 9
"""
TEST_HELPERS_USER = """import pytest

import tinylib
from tests.helpers import CASES


@pytest.mark.parametrize("a,b,want", CASES)
def test_add(a, b, want):
    assert tinylib.add(a, b) == want
"""
DATE = "2024-01-01T00:00:00Z"  # every commit's: the same commit ids on every run

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    return swe_repo.commit(repo, files, message, date=DATE)


def build_tinylib(root: Path) -> tuple[Path, list[str]]:
    repo = root / "tinylib"
    repo.mkdir()
    swe_repo.git(repo, "init", "-q", "-b", "main")
    swe_repo.git(repo, "remote", "add", "origin", "https://github.com/acme/tinylib.git")
    files = {
        "pyproject.toml": PYPROJECT,
        "src/tinylib/__init__.py": LIB,
        "tests/__init__.py": "",
        "tests/helpers.py": HELPERS,
        "tests/test_core.py": TEST_CORE,
        "tests/test_helpers_user.py": TEST_HELPERS_USER,
        "README.md": "tinylib\n",
    }
    shas = [commit(repo, files, "initial")]
    lib = LIB.replace("        return lo\n    return x", "        return hi\n    return x")
    shas.append(
        commit(
            repo,
            {"src/tinylib/__init__.py": lib, "tests/test_core.py": TEST_CORE + CLAMP_TEST},
            "Fix clamp above the range (#12)",
        )
    )
    shas.append(commit(repo, {"README.md": "tinylib: small helpers\n"}, "docs"))
    lib = lib.replace("abs(a) + b", "a + b")
    helpers = "CASES = [(1, 2, 3), (0, 5, 5), (-2, -3, -5)]\n"
    shas.append(
        commit(
            repo,
            {"src/tinylib/__init__.py": lib, "tests/helpers.py": helpers},
            "Fix add for negative numbers (#13)",
        )
    )
    shas.append(
        commit(
            repo,
            {
                "src/tinylib/__init__.py": lib + "\nFAST = True\n",
                "tests/test_fast.py": "import nonexistent_dep\n\n\ndef test_fast():\n    pass\n",
            },
            "Use a fast backend",
        )
    )
    return repo, shas


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """The range C0..C4 synthesized once through the CLI (runs=1)."""
    root = tmp_path_factory.mktemp("swe-real")
    repo, shas = build_tinylib(root)
    try:
        ensure_env(repo, shas[3], InstallSpec())
    except EnvBuildError as err:
        pytest.skip(f"cannot install the environment here: {err}: {err.log[-300:]}")
    out = root / "out"
    args = ["synth", "swe", "--repo", str(repo), "--commits", f"{shas[0]}..{shas[4]}"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--runs", "1"])
    assert res.exit_code == 0, res.output
    instances = [json.loads(x) for x in (out / "instances.jsonl").read_text().splitlines()]
    return root, repo, shas, out, {i["instance_id"]: i for i in instances}


def test_commit_range_gives_swebench_instances_from_a_src_layout(synth):
    root, repo, shas, out, inst = synth
    assert sorted(inst) == ["acme__tinylib-12", "acme__tinylib-13"]
    clamp = inst["acme__tinylib-12"]
    assert json.loads(clamp["FAIL_TO_PASS"]) == ["tests/test_core.py::test_clamp_above"]
    # the package imported from /workspace/src, six came from the test extra, and 100 threads
    # ran under the SWE limits (RLIMIT_NPROC 64 or 1 GiB of address space would fail them)
    assert sorted(json.loads(clamp["PASS_TO_PASS"])) == [
        "tests/test_core.py::test_clamp_below",
        "tests/test_core.py::test_imports_from_the_workspace",
        "tests/test_core.py::test_threads",
    ]
    assert clamp["repo"] == "acme/tinylib" and clamp["version"] == "1.4"
    assert clamp["base_commit"] == shas[0] and "tests/" not in clamp["patch"]
    # one environment per version: the newest base commit among the candidates (C4's base)
    assert clamp["environment_setup_commit"] == shas[3]
    assert inst["acme__tinylib-13"]["environment_setup_commit"] == shas[3]


def test_helper_only_test_patch_runs_the_tests_that_use_it(synth):
    _, _, _, _, inst = synth
    add = inst["acme__tinylib-13"]
    assert "tests/helpers.py" in add["test_patch"] and "test_helpers_user" not in add["test_patch"]
    assert json.loads(add["FAIL_TO_PASS"]) == ["tests/test_helpers_user.py::test_add[-2--3--5]"]
    assert "pytest -rA tests/test_helpers_user.py" in add["eval_script"]


def test_drops_keep_the_output_that_explains_them(synth):
    _, _, shas, out, _ = synth
    drops = {d["id"]: d for d in map(json.loads, (out / "drops.jsonl").read_text().splitlines())}
    reasons = sorted(d["reason"] for d in drops.values())
    assert reasons == ["no test files in test_patch", "no tests collected after the fix"]
    dep = next(d for d in drops.values() if d["reason"].startswith("no tests collected"))
    assert "ModuleNotFoundError" in dep["output"] and "nonexistent_dep" in dep["output"]


def test_official_swebench_package_accepts_the_instances(synth):
    from swebench.harness.utils import make_test_spec
    from swebench.types import SWEbenchInstance

    for i in synth[4].values():
        assert set(SWEbenchInstance.__annotations__) <= set(i)
        assert isinstance(i["FAIL_TO_PASS"], str) and isinstance(i["PASS_TO_PASS"], str)
        spec = make_test_spec(i)
        assert spec.FAIL_TO_PASS == json.loads(i["FAIL_TO_PASS"]) and spec.repo == "acme/tinylib"
        assert spec.version == "1.4" and spec.log_parser == "parse_log_pytest"
        assert ">>>>> Start Test Output" in spec.eval_script


def test_env_check_grades_instances_with_exit_codes(synth, tmp_path):
    _, _, _, out, inst = synth
    one = tmp_path / "i.json"
    one.write_text(json.dumps(inst["acme__tinylib-13"]))
    assert check_task(one)["reward"] == 1.0
    run = CliRunner().invoke(app, ["env", "check", str(one)])
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(app, ["env", "check", "--empty", str(one)])
    assert run.exit_code == 1 and '"reward": 0.0' in run.output
    bare = {k: v for k, v in inst["acme__tinylib-12"].items() if k != "repo_path"}
    one.write_text(json.dumps(bare))
    run = CliRunner().invoke(app, ["env", "check", str(one)])
    assert run.exit_code == 3 and "no local clone of acme/tinylib" in run.output


def test_env_check_reads_a_plain_swebench_record(synth, tmp_path):
    """Only SWE-bench's own fields (+ the clone): the environment comes from the repository's
    conventions at environment_setup_commit; a non-pytest test command is refused (exit 3)."""
    from swebench.types import SWEbenchInstance

    full = synth[4]["acme__tinylib-12"]
    rec = {k: full[k] for k in SWEbenchInstance.__annotations__} | {"repo_path": full["repo_path"]}
    one = tmp_path / "plain.jsonl"
    one.write_text(json.dumps(rec) + "\n")
    assert check_task(one)["reward"] == 1.0
    assert check_task(one, empty=True)["reward"] == 0.0
    script = full["eval_script"].replace("pytest -rA", "./tests/runtests.py")
    one.write_text(json.dumps({**rec, "eval_script": script}) + "\n")
    run = CliRunner().invoke(app, ["env", "check", str(one)])
    assert run.exit_code == 3 and "not a pytest command" in run.output


def test_rerun_reports_resumed_and_fresh_recomputes(synth):
    root, repo, shas, _, _ = synth
    out = root / "docs-only"
    args = ["synth", "swe", "--repo", str(repo), "--commit", shas[2], "--out", str(out)]
    first = CliRunner().invoke(app, args)  # a docs-only commit: nothing to make an instance of
    assert first.exit_code == 1 and json.loads(first.stdout.splitlines()[-1])["resumed"] == 0
    assert "every candidate was dropped" in first.output  # and why, on stderr
    again = CliRunner().invoke(app, args)
    assert "resumed 1 of 1 candidates" in again.output
    fresh = CliRunner().invoke(app, [*args, "--fresh"])
    assert json.loads(fresh.stdout.splitlines()[-1])["resumed"] == 0


def test_swe_limits_use_the_data_segment():
    assert "ulimit -d 4194304" in limits_prefix(Limits(memory_mb=4096, memory_rlimit="data"))
    assert "ulimit -v 1048576" in limits_prefix(Limits())  # other sandboxes keep RLIMIT_AS


def test_detect_install_reads_the_repository_conventions(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[project.optional-dependencies]\ntests = ["a"]\ndocs = ["b"]\n'
        '[dependency-groups]\nbase = ["c>=1"]\ntesting = ["d", {include-group = "base"}]\n'
    )
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "testing.txt").write_text("e\n")
    args, sources = detect_install(tmp_path)
    assert args == ["-e", ".[tests]", "d", "c>=1", "-r", "requirements/testing.txt"]
    assert sources == ["extra [tests]", "group testing", "requirements/testing.txt"]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "tox.ini").write_text(
        "[tox]\n[testenv]\ndeps =\n    pytest\n    freezegun\n    -r{x}\n"
    )
    assert detect_install(bare) == (["pytest", "freezegun"], ["tox.ini deps"])


def test_tests_using_follows_imports_and_conftests(tmp_path):
    files = {
        "tests/__init__.py": "",
        "tests/helpers.py": "",
        "tests/test_a.py": "from tests.helpers import X\n",
        "tests/test_b.py": "from .helpers import X\n",
        "tests/test_c.py": "import os\n",
        "tests/sub/conftest.py": "",
        "tests/sub/test_d.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert helper_test_files(tmp_path, ["tests/helpers.py"]) == [
        "tests/test_a.py",
        "tests/test_b.py",
    ]
    assert helper_test_files(tmp_path, ["tests/sub/conftest.py"]) == ["tests/sub/test_d.py"]
    assert len(helper_test_files(tmp_path, ["tests/__init__.py"])) == 4


def test_metadata_of_a_repository(tmp_path):
    repo, shas = build_tinylib(tmp_path)
    assert repo_slug(repo) == "acme/tinylib" and repo_slug(repo, "me/x") == "me/x"
    assert package_version(repo, shas[0]) == "1.4"
    assert pr_number("Fix (#12)") == "12" and pr_number("no number") is None
    assert os.path.isdir(repo / ".git")


def test_failed_install_is_dropped_with_its_output_cached_and_retried(synth, monkeypatch):
    import shutil
    import tempfile

    root, repo, shas, _, _ = synth
    cache = Path(tempfile.mkdtemp(prefix="arcforge-test-envs-"))
    monkeypatch.setenv("ARCFORGE_SWE_ENVS", str(cache))
    out = root / "broken-install"
    cmd = ["synth", "swe", "--repo", str(repo), "--commit", shas[1], "--out", str(out)]
    cmd += ["--install", "echo no-such-index >&2; exit 3", "--allow-empty"]

    def drop() -> dict:
        res = CliRunner().invoke(app, cmd + extra)
        assert res.exit_code == 0, res.output
        return json.loads((out / "drops.jsonl").read_text().splitlines()[0])

    try:
        extra: list[str] = []
        first = drop()
        assert first["reason"] == "install failed: install failed"
        assert "no-such-index" in first["output"]
        extra = ["--fresh"]  # recompute the candidate: the cached failure is retried once
        assert drop()["reason"] == "install failed: install failed"
        with pytest.raises(EnvBuildError, match="cached"):
            ensure_env(repo, shas[0], InstallSpec(cmd="echo no-such-index >&2; exit 3"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_bad_commit_arguments_are_one_line_errors(synth):
    repo, shas = synth[1], synth[2]
    base = ["synth", "swe", "--repo", str(repo), "--out", str(synth[0] / "bad")]
    for args, msg in [
        (["--commit", "deadbeef"], "--commit deadbeef: no such commit"),
        (["--commits", shas[1]], "expected a range A..B"),
        (["--commits", f"nope..{shas[1]}"], "'nope' is not a commit"),
        (["--commit", shas[0]], "root commit"),
        (["--commit", shas[1], "--repo-name", "bad"], "--repo-name must be owner/name"),
    ]:
        res = CliRunner().invoke(app, [*base, *args])
        assert res.exit_code != 0 and msg in str(res.exception), (args, res.output)
