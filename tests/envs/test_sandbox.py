"""Functional tests of the sandbox API: exec, files, grading dir, backends, pytest inside.

The hostile-command tests live in test_sandbox_containment.py.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from arcforge.sandbox import (
    Limits,
    Sandbox,
    SandboxError,
    host_site_packages,
    open_sandbox,
)
from arcforge.sandbox.docker import docker_client


def test_exec_basics(bwrap_box, tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    sb = bwrap_box(workspace=tmp_path, env={"GLOBAL": "g"})
    assert isinstance(sb, Sandbox)
    res = sb.exec("cat a.txt; echo err >&2; exit 3")
    assert (res.exit_code, res.stdout, res.stderr) == (3, "hello\n", "err\n")
    assert not res.timed_out and not res.truncated and res.duration > 0
    assert sb.exec("echo $GLOBAL $X; pwd", env={"X": "x"}, cwd="/tmp").stdout == "g x\n/tmp\n"
    big = "line\n" * 100_000  # 500 kB through stdin without deadlocking the pipes
    assert sb.exec("wc -l", stdin=big).stdout.strip() == "100000"
    assert sb.exec("id -un; echo $HOME").stdout == "sandbox\n/tmp\n"
    assert sb.exec("python3 -c 'import sys; print(sys.executable)'").stdout == "/usr/bin/python3\n"
    sb.exec("echo changed > a.txt")
    assert (tmp_path / "a.txt").read_text() == "hello\n"  # the host dir is copied, not bound


def test_truncation_marker_on_stderr(bwrap_box):
    sb = bwrap_box(Limits(output_bytes=1000))
    res = sb.exec("yes err | head -c 5000 >&2")
    assert res.truncated and res.stderr.count("err") < 300 and "truncated" in res.stderr


def test_file_methods_refuse_escapes(bwrap_box, tmp_path):
    sb = bwrap_box()
    sb.write_file("dir/x.sh", "#!/bin/sh\necho ok\n", mode=0o755)
    assert sb.exec("./dir/x.sh").stdout == "ok\n"
    assert sb.read_file("/workspace/dir/x.sh").startswith("#!/bin/sh")
    sb.exec("ln -s /etc/passwd evil; ln -s / root; ln -s ../../.. up; mkfifo pipe")
    for bad in ("evil", "root/etc/passwd", "up/x", "/etc/passwd", "../x", "pipe"):
        with pytest.raises(SandboxError):
            sb.read_file(bad)
    with pytest.raises(SandboxError):
        sb.write_file("root/tmp/pwned", "x")
    sid = sb.snapshot()  # a planted FIFO is recreated, not opened (which would hang)
    sb.restore(sid)
    assert sb.exec("test -p pipe && test -L evil && echo ok").stdout == "ok\n"
    sb.copy_out("dir", tmp_path / "out")
    assert (tmp_path / "out" / "x.sh").read_text() == "#!/bin/sh\necho ok\n"


def test_grading_dir_is_writable_only_in_grading_execs(bwrap_box, tmp_path):
    hidden = tmp_path / "hidden_tests"
    hidden.mkdir()
    (hidden / "test_h.py").write_text("def test_h():\n    assert True\n")
    sb = bwrap_box()
    assert not sb.exec("ls tests").exit_code == 0  # hidden tests are absent until grading
    assert sb.exec("echo forged > /grading/report.xml").exit_code != 0
    sb.copy_in(hidden, "/workspace/tests")
    res = sb.exec("ls tests && echo real > /grading/report.xml", grading=True)
    assert res.exit_code == 0 and sb.read_file("/grading/report.xml") == "real\n"
    assert sb.exec("echo forged > /grading/report.xml").exit_code != 0


def test_pytest_runs_inside_with_site_packages_bind(bwrap_box):
    site = host_site_packages()
    sb = bwrap_box(extra_ro_binds={site: "/opt/pysite"}, env={"PYTHONPATH": "/opt/pysite"})
    sb.write_file("test_demo.py", "def test_ok():\n    assert 1 + 1 == 2\n")
    res = sb.exec(
        "python3 -m pytest -q -p no:cacheprovider --junitxml=/grading/junit.xml", grading=True
    )
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout and 'tests="1"' in sb.read_file("/grading/junit.xml")


def test_closed_sandbox_refuses_and_cleans_up(bwrap_box):
    sb = bwrap_box()
    root = sb.store.root
    with sb:
        sb.exec("true")
    assert not root.exists()
    with pytest.raises(SandboxError):
        sb.exec("true")


def test_local_backend_requires_trusted(tmp_path):
    (tmp_path / "f").write_text("v\n")
    with pytest.raises(ValueError, match="trusted=True"):
        open_sandbox("local", workspace=tmp_path)
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        open_sandbox("chroot")
    with open_sandbox("local", workspace=tmp_path, trusted=True, limits=Limits(wall_time=1)) as sb:
        assert sb.exec("cat f; pwd").stdout == f"v\n{sb.workdir}\n"
        sid = sb.snapshot()
        sb.write_file("/workspace/f", "w\n")
        assert sb.exec("cat f").stdout == "w\n"
        sb.restore(sid)
        assert sb.read_file("f") == "v\n"
        assert sb.exec("sleep 5").timed_out


@pytest.mark.skipif(docker_client() is None, reason="no docker SDK or daemon")
def test_docker_backend(tmp_path):
    (tmp_path / "f").write_text("v\n")
    with open_sandbox("docker", workspace=tmp_path) as sb:
        assert sb.exec("cat f").stdout == "v\n"
        assert sb.exec("echo x > /grading/r").exit_code != 0
        assert sb.exec("echo x > /grading/r", grading=True).exit_code == 0


def test_workspace_must_be_a_directory(tmp_path):
    if subprocess.run(["which", "bwrap"], capture_output=True).returncode != 0:
        pytest.skip("no bwrap")
    before = set(os.listdir("/tmp"))
    with pytest.raises(SandboxError):
        open_sandbox("bwrap", workspace=tmp_path / "missing")
    assert not [p for p in set(os.listdir("/tmp")) - before if p.startswith("arcforge-sbx-")]
