"""Real-root task images (rootfs.py, rootfs_build.py, sandbox_rootfs.py): a Terminal-Bench task
whose Dockerfile apt-installs a package the base lacks and writes to /usr/share, /data, /server
and /tmp builds into a Debian root and its oracle passes; episodes are copy-on-write views,
isolated from each other, leaving the image untouched; a build cannot reach the host's
loopback; a failed build is cached with its reason; `arcforge env check` exits 0 / 1 / 3.

The Debian base is built once (mmdebstrap, ~2 min) into ~/.cache/arcforge/rootfs and reused
by every later session; images of the fixture are cached there too.
"""

from __future__ import annotations

import errno
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcforge.cli import app
from arcforge.envs.check import check_task
from arcforge.envs.importers import Import, adapt_test_script, import_task_dir
from arcforge.sandbox import rootfs
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.root import build_layer
from arcforge.sandbox.rootfs import base_for, ensure_base, rootfs_blockers
from arcforge.sandbox.rootfs_build import build_image
from arcforge.sandbox.rootfs_sandbox import RootfsSandbox
from arcforge.sandbox.types import Limits, SandboxError

FIXTURE = Path(__file__).parent / "fixtures" / "terminal-bench" / "apt-outside-app"
UV_HELPERS = Path(__file__).parent / "fixtures" / "terminal-bench" / "uv-helpers"
needs_rootfs = pytest.mark.skipif(bool(rootfs_blockers()), reason="; ".join(rootfs_blockers()))


@pytest.fixture(scope="module")
def base() -> Path:
    """The cached Debian base of python:3.11 images (built on the first session only)."""
    return ensure_base(*base_for("python:3.11-slim-bookworm"))


@pytest.fixture(scope="module")
def image(base):
    build = build_image(FIXTURE / "Dockerfile")
    assert build.image is not None, build.unsupported
    assert build.image.lowers[1] == base
    return build.image


def listing(path: Path) -> set[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every entry: cheap enough for a 300 MB root."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out.add((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns))
    return out


def test_python_images_map_to_the_matching_debian_release():
    assert base_for("python:3.11-slim-bookworm")[0] == "bookworm"
    assert base_for("python:3.13-slim")[0] == "trixie"  # Debian 12 has no 3.13
    assert "python3-pip" in base_for("python:3.12")[1]
    assert base_for("ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624")[0] == "trixie"
    assert base_for("nvidia/cuda:12.1-runtime") is None


@needs_rootfs
def test_apt_install_and_writes_outside_app_and_tmp_are_in_the_image(image, monkeypatch):
    task = import_task_dir(FIXTURE)  # auto: the host lacks `tree`, so the layer cannot build
    assert not task.metadata["unsupported"], task.metadata["unsupported"]
    assert "rootfs_image" in task.context and "root_layer" not in task.context
    assert Path(task.context["rootfs_image"]) == image.lowers[0].parent
    good = check_task(task)
    assert good["reward"] == 1.0, good
    empty = check_task(task, empty=True)
    assert empty["reward"] == 0.0 and "seed" in empty["details"]["output"], empty


@needs_rootfs
def test_cow_episodes_are_isolated_and_the_image_is_untouched(image):
    upper, base = image.lowers
    before_upper, before_base = listing(upper), listing(base)
    a, b = RootfsSandbox(image, Limits()), RootfsSandbox(image, Limits())
    try:
        res = a.exec(
            "id -u; pwd; tree --version | cut -c1-4; arc-tool; cat /tmp/seed.txt; "
            "echo mine > /usr/share/arc-words/list.txt; rm /data/input.txt; "
            "apt-get --version >/dev/null && mkdir -p /etc/new && echo ok"
        )
        assert res.stdout.split() == ["0", "/app", "tree", "tool-ok", "seed-42", "ok"], res
        seen = b.exec("cat /usr/share/arc-words/list.txt /data/input.txt; ls /etc/new 2>&1")
        assert seen.stdout.startswith("alpha\nbeta\ngamma\none\ntwo\n"), seen
        assert "No such file" in seen.stdout
        snap = a.snapshot()
        a.exec("echo later > /srv/x")
        a.restore(snap)
        assert a.exec("cat /srv/x").exit_code != 0
        assert a.read_file("/usr/share/arc-words/list.txt") == "mine\n"
        a.exec("ln -s / /app/rootlink && ln -s ../../../../../etc /app/up")
        # links resolve as inside: an absolute one within the root, never the host's
        assert a.read_file("/app/rootlink/etc/hostname") == "sandbox\n"
        for path in ("/app/../../etc/shadow", "/app/up/shadow"):
            with pytest.raises(SandboxError):
                a.read_file(path)
    finally:
        a.close()
        b.close()
    assert listing(upper) == before_upper and listing(base) == before_base


@needs_rootfs
def test_a_real_root_episode_is_still_contained(image, host_bait):
    secret, port = host_bait
    with RootfsSandbox(image, Limits()) as sb:
        probe = sb.exec(
            f"cat {secret} 2>&1; ls /work 2>&1; python3 -c 'import socket; "
            f'socket.create_connection(("127.0.0.1", {port}), 2)\' 2>&1 | tail -1; '
            "grep -c tap0 /proc/net/dev; ls /proc | grep -c '^[0-9]'; "
            "unshare -U true 2>&1 | tail -1"
        )
        assert "s3cret" not in probe.stdout and "No such file" in probe.stdout, probe
        assert "ConnectionRefused" in probe.stdout or "unreachable" in probe.stdout, probe
        lines = probe.stdout.splitlines()
        assert lines[-3] == "0", probe  # no link out: episodes have no network
        assert int(lines[-2]) <= 6, probe  # only the sandbox's own processes
        assert "Operation not permitted" in lines[-1] or "No space" in lines[-1], probe


@needs_rootfs
def test_fuse_overlayfs_stands_in_where_the_kernel_refuses(image, monkeypatch):
    if shutil.which("fuse-overlayfs") is None:
        pytest.skip("fuse-overlayfs is not installed")
    monkeypatch.setattr(rootfs, "_kernel_mount", lambda opts, target: errno.EPERM)  # the kernel
    with RootfsSandbox(image, Limits()) as sb:
        assert sb.store.view.kind == "fuse-overlayfs"
        res = sb.exec("rm /data/input.txt && echo x > /usr/share/y && ls /data; cat /tmp/seed.txt")
        assert res.stdout == "seed-42\n", res
    with RootfsSandbox(image, Limits()) as sb:
        out = sb.exec("ls /data /usr/share/y 2>&1").stdout
        assert "input.txt" in out and "cannot access '/usr/share/y'" in out, out


@needs_rootfs
def test_a_build_cannot_reach_the_hosts_loopback(base, tmp_path):
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host-secret")

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        import urllib.request

        # the server answers on the host: the build below is refused by isolation, not by it
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/host", timeout=5).read() == (
            b"host-secret"
        )
        fetch = (
            'python3 -c "import sys, urllib.request; urllib.request.urlopen('
            'sys.argv[1], timeout=5)"'
        )
        (tmp_path / "Dockerfile").write_text(
            "FROM python:3.11-slim-bookworm\n"
            # tap0: slirp4netns's link out is there (outbound works: the apt test's build)
            f"RUN grep -q tap0 /proc/net/dev && {{ {fetch} http://127.0.0.1:{port}/loopback"
            f" || {fetch} http://10.0.2.2:{port}/gw || exit 7; }}\n"
        )
        build = build_image(tmp_path / "Dockerfile", cache=base.parent)
        assert build.image is None and not build.cached
        assert "exit 7" in build.unsupported[0], build.unsupported
        assert hits == ["/host"]  # nothing from the build arrived
        again = build_image(tmp_path / "Dockerfile", cache=base.parent)  # the failure is cached
        assert again.cached and again.unsupported == build.unsupported
        # a layer over the host's /usr builds in the same kind of private network
        layer = build_layer(tmp_path / "Dockerfile", cache=tmp_path / "layers")
        assert layer.layer is None and "exit 7" in layer.unsupported[0], layer.unsupported
        assert hits == ["/host"]
    finally:
        srv.shutdown()
        srv.server_close()


@needs_rootfs
def test_env_check_exit_codes_and_every_blocker_listed(image, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCFORGE_TASK_ROOT", "auto")  # restored after: --root sets it in-process
    runner = CliRunner()
    ok = runner.invoke(app, ["env", "check", str(FIXTURE)])
    assert ok.exit_code == 0, ok.output
    empty = runner.invoke(app, ["env", "check", str(FIXTURE), "--empty"])
    assert empty.exit_code == 1, empty.output
    bad = tmp_path / "gpu-task"
    (bad / "tests").mkdir(parents=True)
    (bad / "task.yaml").write_text("instruction: train a model\n")
    (bad / "run-tests.sh").write_text("#!/bin/bash\nexit 0\n")
    (bad / "Dockerfile").write_text("FROM nvidia/cuda:12.1-runtime\nUSER app\n")
    (bad / "docker-compose.yaml").write_text("services:\n  client: {}\n  db: {}\n")
    res = runner.invoke(app, ["env", "check", str(bad), "--root", "rootfs"])
    assert res.exit_code == 3, res.output
    blockers = [line for line in res.stderr.splitlines() if line.startswith("- ")]
    remedies = [line for line in res.stderr.splitlines() if line.strip().startswith("remedy:")]
    # GPU and services (a USER is replayed: solution and agent execs run as that user)
    assert len(blockers) == 2 and len(remedies) == 2, res.stderr
    assert any("GPU" in b for b in blockers) and any("services" in b for b in blockers)


def test_tb1_uv_helpers_and_uv_add_are_installed_at_build_time_not_at_test_time():
    imp = Import()
    imp.container = True
    verify = adapt_test_script(
        "source $TEST_DIR/setup-uv-pytest.sh\nuv add requests==2.32.4\n"
        "bash $TEST_DIR/run-uv-pytest.sh\n",
        imp,
    )
    assert imp.hoist_pip == ["requests==2.32.4"] and "uv add" not in verify
    task = import_task_dir(UV_HELPERS, container=False)  # no image needed for the adaptation
    setup = task.metadata["test_files"]["setup-uv-pytest.sh"]
    run = task.metadata["test_files"]["run-uv-pytest.sh"]
    assert "astral.sh" not in setup and "uv add" not in setup and "uv init" not in setup
    assert "python3 -P -m pytest" in run and "uv run" not in run
    assert task.metadata["solution"].strip() == 'echo "Hello, world!" > hello.txt'  # solution.yaml


def test_tb1_task_with_helper_scripts_and_solution_yaml_checks_out():
    if not bwrap_available():
        pytest.skip("bubblewrap cannot run here")
    task = import_task_dir(UV_HELPERS)
    assert not task.metadata["unsupported"], task.metadata["unsupported"]
    good = check_task(task)
    assert good["reward"] == 1.0 and "1 passed" in good["details"]["output"], good
    assert check_task(task, empty=True)["reward"] == 0.0


@needs_rootfs
def test_harbor_solution_dir_is_at_slash_solution_for_the_oracle_only(base, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCFORGE_TASK_ROOT", "rootfs")
    root = tmp_path / "copy-answer"
    for d in ("environment", "solution/data", "tests"):
        (root / d).mkdir(parents=True)
    (root / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim-bookworm\nWORKDIR /app\n"
    )
    (root / "solution" / "data" / "answer.txt").write_text("42\n")
    (root / "solution" / "solve.sh").write_text("cp /solution/data/answer.txt /app/answer.txt\n")
    (root / "tests" / "test.sh").write_text(
        "ls /solution 2>/dev/null && echo SOLUTION-VISIBLE\n"
        "grep -qx 42 /app/answer.txt && echo 1 > /logs/verifier/reward.txt "
        "|| echo 0 > /logs/verifier/reward.txt\n"
    )
    (root / "instruction.md").write_text("Write the answer to /app/answer.txt.\n")
    (root / "task.toml").write_text("[verifier]\ntimeout_sec = 30\n")
    task = import_task_dir(root)
    assert "rootfs_image" in task.context, task.metadata["unsupported"]
    assert check_task(task)["reward"] == 1.0
    empty = check_task(task, empty=True)
    assert empty["reward"] == 0.0 and "SOLUTION-VISIBLE" not in empty["details"]["output"]


@needs_rootfs
def test_solution_time_apt_get_is_satisfied_by_the_image_or_says_why_not(image, tmp_path):
    with RootfsSandbox(image, Limits()) as sb:
        # the image has tree (its Dockerfile installed it) and curl (the base): under set -e
        # the whole line succeeds without a network
        ok = sb.exec("set -e\napt-get update && apt-get install -y tree curl\necho installed")
        assert ok.exit_code == 0 and ok.stdout.endswith("installed\n"), ok
        assert "already the newest version" in ok.stdout
        missing = sb.exec("set -e\napt-get update && apt-get install -y jq\necho installed")
        assert missing.exit_code == 100 and "installed" not in missing.stdout, missing
        assert "jq" in missing.stderr and "episodes have no network" in missing.stderr
        assert "install the package(s) in the Dockerfile" in missing.stderr
    # a task whose oracle starts that way checks out
    task_dir = tmp_path / "apt-solution"
    shutil.copytree(FIXTURE, task_dir)
    sol = (task_dir / "solution.sh").read_text()
    (task_dir / "solution.sh").write_text(
        "#!/bin/bash\nset -e\napt-get update && apt-get install -y tree\n" + sol
    )
    task = import_task_dir(task_dir)
    assert check_task(task)["reward"] == 1.0
