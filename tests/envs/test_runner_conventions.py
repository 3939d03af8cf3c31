"""Terminal-Bench 1 and Harbor runner conventions the verdict depends on.

- TB1's `parser_name: pytest`: the verdict is pytest's `-rA` summary (every test PASSED), not
  the script's exit code (a run-tests.sh ending in `|| true` still fails a failing test);
- Harbor's verifier may write /logs/verifier/reward.json instead of reward.txt;
- a task's own agent timeout bounds the solution, and cpus / memory beyond this machine are
  reported with the verdict;
- a build step that fails for want of a non-registry host names that host as the blocker.
The summaries come from real pytest runs; the tasks run in the bwrap sandbox (rewrite mode).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arcforge.envs.blockers import blocker_class
from arcforge.envs.check import check_task
from arcforge.envs.importers import import_task_dir, task_resources
from arcforge.envs.terminal_env import pytest_verdict
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.root import apt_packages
from arcforge.sandbox.rootfs import rootfs_blockers
from arcforge.sandbox.rootfs_build import UBUNTU_ONLY, build_image, offline_hosts
from arcforge.sandbox.rootfs_sandbox import RootfsSandbox
from arcforge.sandbox.types import Limits

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def pytest_output(tmp_path: Path, body: str) -> str:
    (tmp_path / "test_x.py").write_text(body)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    return res.stdout


def test_pytest_parser_reads_the_short_summary(tmp_path):
    ok = pytest_output(tmp_path, "def test_a():\n    pass\ndef test_b():\n    pass\n")
    bad = pytest_output(tmp_path, "def test_a():\n    pass\ndef test_b():\n    assert 0\n")
    broken = pytest_output(tmp_path, "import no_such_module\ndef test_a():\n    pass\n")
    assert pytest_verdict(ok) is True
    assert pytest_verdict(bad) is False
    assert pytest_verdict(broken) is False  # a collection error is an ERROR line
    assert pytest_verdict("no pytest here\n") is None


def tb1_task(root: Path, run_tests: str, solution: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text(
        "instruction: write ok to answer.txt\nparser_name: pytest\nmax_agent_timeout_sec: 5\n"
    )
    (root / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\n"
        "def test_answer():\n    assert Path('/workspace/answer.txt').read_text() == 'ok\\n'\n"
    )
    (root / "run-tests.sh").write_text(run_tests)
    (root / "solution.sh").write_text(solution)
    return root


@needs_bwrap
def test_tb1_pytest_parser_overrides_a_swallowed_exit_code(tmp_path):
    run_tests = "#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py -rA || true\n"
    task = tb1_task(tmp_path / "t", run_tests, "echo ok > answer.txt\n")
    t = import_task_dir(task, container=False)
    assert t.metadata["parser_name"] == "pytest" and t.metadata["agent_timeout"] == 5
    assert check_task(t)["reward"] == 1.0
    empty = check_task(t, empty=True)
    assert empty["reward"] == 0.0 and empty["details"]["exit_code"] == 0  # exit 0, yet failed


@needs_bwrap
def test_a_solution_is_bounded_by_the_tasks_agent_timeout(tmp_path):
    run_tests = "#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py -rA\n"
    task = tb1_task(tmp_path / "t", run_tests, "sleep 30; echo ok > answer.txt\n")
    out = check_task(import_task_dir(task, container=False))
    assert out["reward"] == 0.0
    assert out["details"]["solution_exit_code"] != 0  # killed at 5 s, not after 30


@needs_bwrap
def test_harbor_reward_json_is_read_when_there_is_no_reward_txt(tmp_path):
    root = tmp_path / "h"
    (root / "tests").mkdir(parents=True)
    (root / "solution").mkdir()
    (root / "task.toml").write_text(
        'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 60\n'
        "[environment]\ncpus = 64\nmemory = '4096G'\n"
    )
    (root / "instruction.md").write_text("create done.txt\n")
    (root / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ -f /app/done.txt ]; then r=1; else r=0; fi\n"
        'echo "{\\"reward\\": $r}" > /logs/verifier/reward.json\n'
    )
    (root / "solution" / "solve.sh").write_text("#!/bin/bash\ntouch /app/done.txt\n")
    t = import_task_dir(root, container=False)
    ok = check_task(t)
    assert ok["reward"] == 1.0, ok
    assert check_task(t, empty=True)["reward"] == 0.0
    notes = ok["details"]["resource_notes"]
    assert any("64 cpus" in n for n in notes) and any("MiB of memory" in n for n in notes)


def test_resources_within_this_machine_are_not_reported():
    assert "resource_notes" not in task_resources({"cpus": 1, "memory": "512M"})
    assert task_resources({"memory": "2G"})["memory_mb"] == 2048


def test_a_build_step_cut_off_from_a_non_registry_host_names_it():
    out = "curl: (6) Could not resolve host: notofonts.github.io\n"
    cmd = "curl -fsSL https://notofonts.github.io/x.ttf -o /x.ttf"
    hosts = offline_hosts(cmd, out, 6)
    assert hosts == ["notofonts.github.io"]
    reason = f"needs the network at build time: {hosts[0]} is not a package registry"
    assert blocker_class(reason) == "network"
    # a registry host, or a step that failed for another reason, is no network blocker
    pip_out = "Could not resolve host: files.pythonhosted.org"
    assert offline_hosts("pip install https://files.pythonhosted.org/x.whl", pip_out, 1) == []
    # the host a variable named, seen in curl's own message
    assert offline_hosts('curl -fsSL "$URL" -o x', out, 6) == ["notofonts.github.io"]
    assert offline_hosts("curl -f https://example.org/a", "404 Not Found", 22) == []


@needs_bwrap
def test_a_solution_or_verifier_that_needs_the_network_is_refused_with_that_blocker(tmp_path):
    run_tests = "#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py -rA\n"
    fetch = "curl -sS https://example.org/answer -o answer.txt\n"
    task = tb1_task(tmp_path / "solve", run_tests, fetch)
    out = check_task(import_task_dir(task, container=False))
    assert out["reward"] == 0.0
    (reason,) = out["details"]["unsupported"]
    assert "at solve time" in reason and blocker_class(reason) == "network"
    judge = "#!/bin/bash\ncurl -sS https://judge.example.org/submit || exit 1\n"
    task = tb1_task(tmp_path / "judge", judge, "echo ok > answer.txt\n")
    out = check_task(import_task_dir(task, container=False))
    # (the import already sees the download in the verify script; either way a network blocker)
    assert out["reward"] == 0.0
    assert [blocker_class(r) for r in out["details"]["unsupported"]] == ["network"]


def test_a_ppa_or_an_ubuntu_only_package_is_named_as_such():
    assert offline_hosts("add-apt-repository -y ppa:deadsnakes/ppa", "Traceback", 1) == [
        "ppa.launchpadcontent.net (ppa:deadsnakes/ppa)"
    ]
    apt = "E: Version '2023.20240207-1' for 'texlive-latex-base' was not found\n"
    assert UBUNTU_ONLY.findall(apt) == [("2023.20240207-1", "texlive-latex-base", "", "")]
    reason = "base image ubuntu:24.04 has no Debian stand-in for what this build installs"
    assert blocker_class(reason) == "non-debian base"


@pytest.mark.slow  # a Debian base (mmdebstrap, on first use), apt and PyPI
@pytest.mark.skipif(bool(rootfs_blockers()), reason="real roots cannot be built here")
def test_the_verifiers_pip_installs_work_in_an_image_without_pip(tmp_path):
    # ubuntu:24.04 ships python3 without pip; Terminal-Bench's verifiers bring their own
    # (uvx -w ...), which the build turns into a pip install into the image
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    build = build_image(tmp_path / "Dockerfile", extra_pip=["six==1.16.0"])
    assert build.image is not None, build.unsupported
    sb = RootfsSandbox(build.image, Limits(wall_time=60))
    try:
        res = sb.exec("python3 -c 'import six; print(six.__version__)'")
    finally:
        sb.close()
    assert res.stdout.strip() == "1.16.0", res.stdout + res.stderr


def test_the_verifiers_apt_installs_are_found_behind_variable_assignments():
    # git-multibranch's test.sh: hoisted into the build, as episodes have no network
    seg = "DEBIAN_FRONTEND=noninteractive apt-get install -y expect curl"
    assert apt_packages(seg) == ["expect", "curl"]
    assert apt_packages("sudo apt install -y git") == ["git"]
    assert apt_packages("echo apt-get install x") is None
