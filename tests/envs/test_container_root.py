"""Container-like task roots over the host's /usr (sandbox_root.py), the explicit
ARCFORGE_TASK_ROOT=layer option (real Debian roots are the default where the host can build
them): a Harbor task whose Dockerfile writes /etc, /usr/local and /root, pip-installs a wheel
and sets WORKDIR/ENV is built into a cached layer offline; its reference solution passes as
uid 0 in /app and no solution fails; every episode starts from the layer and throws its
changes away; restore() covers the layer; the sandbox is as contained as the plain one."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from arcforge.envs.check import check_task
from arcforge.envs.importers import import_task_dir
from arcforge.envs.terminal_env import TerminalEnv
from arcforge.sandbox import open_sandbox
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.root import build_layer
from arcforge.sandbox.rootfs import rootfs_blockers
from arcforge.sandbox.types import RootLayer
from arcforge.types import Message

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(autouse=True)
def layer_mode(monkeypatch):
    """Every test here asks for the host layer explicitly."""
    monkeypatch.setenv("ARCFORGE_TASK_ROOT", "layer")


WHEEL = "tinypkg-0.1-py3-none-any.whl"
DOCKERFILE = f"""FROM python:3.11-slim-bookworm
ARG TOOL_NAME=greet
WORKDIR /app
ENV APP_MODE=prod \\
    GREETING_FILE=/etc/greeting.conf
COPY data/ /app/data/
COPY {WHEEL} /opt/dist/
RUN apt-get update && apt-get install -y bash coreutils && rm -rf /var/lib/apt/lists/*
RUN pip install /opt/dist/{WHEEL}
RUN echo "hello from the image" > $GREETING_FILE \\
    && printf '#!/bin/sh\\necho "$APP_MODE tool"\\n' > /usr/local/bin/$TOOL_NAME \\
    && chmod +x /usr/local/bin/$TOOL_NAME \\
    && echo 'export PS1=box' >> /root/.bashrc
WORKDIR /app/work
"""
TEST_SH = """#!/bin/bash
pip install /opt/dist/extra-0.1-py3-none-any.whl
cd /app/work || exit 1
python3 -m pytest /tests/test_state.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
TEST_PY = """import os, subprocess
def test_state():
    assert os.getuid() == 0 and os.getcwd() == "/app/work"
    import tinypkg, extra
    assert open("/root/report.txt").read().strip() == tinypkg.answer() + " " + extra.VALUE
    assert "greet-ok" in open("/etc/motd").read()
    assert subprocess.run(["greet"], capture_output=True, text=True).stdout.strip() == "prod tool"
"""
SOLVE = """python3 -c 'import tinypkg, extra; print(tinypkg.answer(), extra.VALUE)' > /root/report.txt
echo greet-ok >> /etc/motd
"""


def make_wheel(path: Path, name: str, source: str) -> None:
    """A minimal pure-Python wheel (pip installs it offline)."""
    dist = f"{name}-0.1.dist-info"
    files = {
        f"{name}/__init__.py": source,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr(f"{dist}/RECORD", "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n")


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harbor") / "rooted-task"
    env = root / "environment"
    (env / "data").mkdir(parents=True)
    (env / "data" / "input.txt").write_text("42\n")
    make_wheel(env / WHEEL, "tinypkg", "def answer():\n    return 'forty-two'\n")
    # the verifier's own test-time install: hoisted into the layer build
    make_wheel(env / "extra-0.1-py3-none-any.whl", "extra", "VALUE = 'extra'\n")
    (env / "Dockerfile").write_text(
        DOCKERFILE.replace(
            f"COPY {WHEEL} /opt/dist/", f"COPY {WHEEL} extra-0.1-py3-none-any.whl /opt/dist/"
        )
    )
    (root / "tests").mkdir()
    (root / "tests" / "test.sh").write_text(TEST_SH)
    (root / "tests" / "test_state.py").write_text(TEST_PY)
    (root / "solution").mkdir()
    (root / "solution" / "solve.sh").write_text(SOLVE)
    (root / "instruction.md").write_text("Write tinypkg's answer to /root/report.txt.\n")
    (root / "task.toml").write_text("[verifier]\ntimeout_sec = 60\n")
    return root


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.rglob("*")):
        h.update(f.relative_to(path).as_posix().encode())
        if f.is_file() and not f.is_symlink():
            h.update(f.read_bytes())
    return h.hexdigest()


def test_dockerfile_replay_builds_a_layer_and_the_oracle_passes(task_dir):
    task = import_task_dir(task_dir)
    assert not task.metadata["unsupported"] and task.metadata["container"]
    assert "pip install" not in task.validation.verify_script  # hoisted into the layer
    assert task.context["extra_pip"] == ["/opt/dist/extra-0.1-py3-none-any.whl"]
    layer = RootLayer.load(task.context["root_layer"])
    assert layer.workdir == "/app/work"
    assert layer.env == {"APP_MODE": "prod", "GREETING_FILE": "/etc/greeting.conf"}
    assert (layer.path / "etc/greeting.conf").read_text() == "hello from the image\n"
    assert (layer.path / "usr/local/bin/greet").is_file()
    assert (layer.path / "app/data/input.txt").read_text() == "42\n"
    assert list((layer.path / "usr/local/venv/lib").glob("python3*/site-packages/tinypkg"))
    good = check_task(task)
    assert good["reward"] == 1.0, good
    assert check_task(task, empty=True)["reward"] == 0.0
    # a rebuild is a cache hit
    df = task_dir / "environment" / "Dockerfile"
    again = build_layer(df, extra_pip=task.context["extra_pip"])
    assert again.cached and again.layer is not None and again.layer.path == layer.path


def test_the_default_is_a_real_root_where_the_host_can_build_one(task_dir, monkeypatch):
    monkeypatch.delenv("ARCFORGE_TASK_ROOT")
    task = import_task_dir(task_dir)
    if rootfs_blockers():  # no mmdebstrap / not root: the layer stands in
        assert "root_layer" in task.context, task.metadata["unsupported"]
        return
    assert "rootfs_image" in task.context and "root_layer" not in task.context, task.metadata
    assert check_task(task)["reward"] == 1.0
    assert check_task(task, empty=True)["reward"] == 0.0


def test_episodes_start_from_the_layer_and_throw_changes_away(task_dir):
    task = import_task_dir(task_dir)
    layer_path = Path(task.context["root_layer"])
    before = tree_digest(layer_path)
    env = TerminalEnv()
    env.reset(task)
    sb = env.sb
    assert sb is not None
    res = sb.exec(
        "id -u; pwd; echo $HOME $APP_MODE; cat /etc/greeting.conf; greet; "
        "python3 -c 'import tinypkg; print(tinypkg.answer())'"
    )
    assert res.stdout.split("\n")[:6] == [
        "0",
        "/app/work",
        "/root prod",
        "hello from the image",
        "prod tool",
        "forty-two",
    ], res
    # Dockerfile-style writes succeed; the host's system dirs stay read-only
    ok = sb.exec(
        "echo x > /etc/new.conf && mkdir -p /usr/local/lib/x && touch /root/r "
        "&& apt-get --version >/dev/null; echo done"
    )
    assert ok.stdout.strip() == "done" and sb.read_file("/etc/new.conf") == "x\n"
    assert sb.exec("touch /usr/bin/evil").exit_code != 0
    snap = sb.snapshot()
    sb.exec("rm /etc/greeting.conf; echo changed > /root/r")
    sb.restore(snap)
    assert sb.exec("cat /etc/greeting.conf /root/r").stdout == "hello from the image\n"
    sb.exec("echo later > /etc/later.conf")
    assert sb.exec("cd /app && rm -rf /app/work && pwd").stdout == "/app\n"
    assert sb.exec("pwd").stdout == "/app\n"  # WORKDIR gone: the next exec starts in /app
    env.reset(task)  # a new episode: none of the last one's changes
    fresh = env.sb.exec("ls /etc/new.conf /etc/later.conf /root/r 2>&1; cat /etc/greeting.conf")
    assert fresh.stdout.count("No such file") == 3 and "hello from the image" in fresh.stdout
    env.close()
    assert tree_digest(layer_path) == before  # the cached layer is never written


def test_agent_cannot_forge_the_reward_file(task_dir):
    task = import_task_dir(task_dir)
    env = TerminalEnv()
    env.reset(task)
    forge = env.sb.exec("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt")
    assert forge.exit_code != 0  # /logs is read-only to the agent
    env.step(Message("assistant", "done"))
    assert env.verify().score == 0.0
    env.close()


def test_container_root_is_still_contained(task_dir, host_bait):
    layer = build_layer(
        task_dir / "environment" / "Dockerfile", extra_pip=["/opt/dist/extra-0.1-py3-none-any.whl"]
    ).layer
    assert layer is not None
    secret, port = host_bait
    with open_sandbox("bwrap", root=layer) as sb:
        probe = sb.exec(
            f"cat {secret} 2>&1; ls /work /home 2>&1; "
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
            " 2>&1 | tail -1; ls /proc | grep -c '^[0-9]'"
        )
        assert "s3cret" not in probe.stdout
        assert "ConnectionRefused" in probe.stdout or "unreachable" in probe.stdout, probe
        assert int(probe.stdout.split()[-1]) <= 6  # only the sandbox's own processes (host: many)
