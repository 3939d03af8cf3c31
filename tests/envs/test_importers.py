"""Terminal-Bench and Harbor task directories (hand-written fixtures in the real layouts) ->
Task -> `check_task`: the reference solution passes, no solution fails; unsupported tasks say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arcforge.envs.check import check_task, load_task
from arcforge.envs.importers import import_task_dir, rewrite_paths
from arcforge.envs.terminal_env import TerminalEnv
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.sandbox.rootfs import rootfs_blockers
from arcforge.sandbox.rootfs_build import load_image
from arcforge.sandbox.types import RootLayer
from arcforge.types import Task, Validation

FIXTURES = Path(__file__).parent / "fixtures"
TASK_DIRS = [
    "terminal-bench/hello-world",
    "terminal-bench/fix-permissions",
    "harbor/hello-world",
    "harbor/csv-to-json",
]
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


def test_rewrite_paths_maps_container_paths_only():
    text = 'cd /app && cat /app/x "/app" /apple /usr/app /tests/t.py /logs/verifier $TEST_DIR'
    assert rewrite_paths(text) == (
        'cd /workspace && cat /workspace/x "/workspace" /apple '
        "/usr/app /grading/tests/t.py /grading/logs/verifier $TEST_DIR"
    )


def test_terminal_bench_import_fields_rewrite_mode():
    t = import_task_dir(FIXTURES / "terminal-bench/fix-permissions", container=False)
    assert (t.id, t.kind, t.difficulty) == ("terminal-bench:fix-permissions", "terminal", 0.25)
    assert t.instruction.startswith("A script called 'process_data.sh'")
    assert "chmod 644 /workspace/process_data.sh" in t.context["init_script"]
    assert "/workspace/output" in t.context["files"]["process_data.sh"]
    assert '"/workspace/process_data.sh"' in t.metadata["test_files"]["test_outputs.py"]
    verify = t.validation.verify_script
    assert "python3 -P -m pytest $TEST_DIR/test_outputs.py -rA" in verify
    assert "curl" not in verify and "uv " not in verify and not t.metadata["unsupported"]
    assert "./process_data.sh" in t.metadata["solution"]


@needs_bwrap
@pytest.mark.parametrize("mode", ["layer", "auto"])
def test_terminal_bench_import_fields_container_mode(mode, monkeypatch):
    monkeypatch.setenv("ARCFORGE_TASK_ROOT", mode)
    t = import_task_dir(FIXTURES / "terminal-bench/fix-permissions")
    assert t.metadata["container"] and not t.metadata["unsupported"]
    if mode == "auto" and not rootfs_blockers():  # the default: a real root
        image = load_image(t.context["rootfs_image"])
        workdir, top = image.workdir, image.lowers[0]
    else:
        layer = RootLayer.load(t.context["root_layer"])
        workdir, top = layer.workdir, layer.path
    assert workdir == "/app" and (top / "app/process_data.sh").is_file()
    assert "/app/output" in (top / "app/process_data.sh").read_text()  # not rewritten
    assert '"/app/process_data.sh"' in t.metadata["test_files"]["test_outputs.py"]
    assert "python3 -P -m pytest $TEST_DIR/test_outputs.py -rA" in t.validation.verify_script
    assert t.context["files"] == {} and t.context["init_script"] == ""
    assert t.context["extra_pip"] == []  # `uv pip install pytest==8.4.1`: the sandbox has pytest


def test_harbor_import_fields_rewrite_mode():
    t = import_task_dir(FIXTURES / "harbor/csv-to-json", container=False)
    assert t.id == "harbor:csv-to-json" and t.metadata["reward_file"].startswith("/grading/logs")
    assert t.context["files"]["data/sales.csv"].startswith("region,product,units")
    assert t.context["env"] == {"PYTHONDONTWRITEBYTECODE": "1"}
    assert "python3 -P -m pytest /grading/tests/test_outputs.py -rA" in t.validation.verify_script
    assert "test.sh" not in t.metadata["test_files"] and t.metadata["verify_timeout"] == 120.0


@needs_bwrap
@pytest.mark.parametrize("rel", TASK_DIRS)
def test_fixture_tasks_pass_with_reference_and_fail_empty(rel):
    good = check_task(FIXTURES / rel)
    assert good["reward"] == 1.0, good
    assert check_task(FIXTURES / rel, empty=True)["reward"] == 0.0


@needs_bwrap
def test_given_solution_file_and_task_json(tmp_path):
    wrong = tmp_path / "wrong.sh"
    wrong.write_text("echo 'Hello, World' > hello.txt\n")
    assert check_task(FIXTURES / "harbor/hello-world", solution=str(wrong))["reward"] == 0.0
    task = Task(
        "json-1",
        "terminal",
        "Write 7 to n.txt.",
        validation=Validation(verify_script='[ "$(cat n.txt)" = 7 ]'),
        metadata={"solution": "echo 7 > n.txt"},
    )
    (tmp_path / "task.json").write_text(json.dumps(task.to_dict()))
    assert load_task(tmp_path / "task.json") == task
    assert check_task(tmp_path / "task.json")["reward"] == 1.0


def test_unsupported_tasks_name_the_reason_rewrite_mode(tmp_path):
    root = tmp_path / "needs-net"
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text("instruction: Train a model.\ndifficulty: hard\n")
    (root / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04\nWORKDIR /app\n"
        "RUN apt-get update && apt-get install -y arcforge-no-such-pkg\n"
        "RUN pip install arcforge-no-such-wheel==1.0 pytest\n"
        "RUN curl -L https://example.com/data.tgz | tar xz\n"
    )
    (root / "run-tests.sh").write_text("pytest $TEST_DIR/test_outputs.py\n")
    task = import_task_dir(root, container=False)
    reasons = " | ".join(task.metadata["unsupported"])
    for needle in (
        "nvidia/cuda",
        "arcforge-no-such-pkg",
        "arcforge-no-such-wheel",
        "network access",
    ):
        assert needle in reasons, reasons
    assert "pytest" not in reasons.replace("arcforge-no-such-wheel", "")  # pytest is provided
    out = check_task(task)
    assert out["reward"] == 0.0 and out["details"]["unsupported"] == task.metadata["unsupported"]
    with pytest.raises(ValueError, match="unsupported"):
        TerminalEnv().reset(task)
    with pytest.raises(ValueError, match="neither"):
        import_task_dir(tmp_path)


UNBUILDABLE = {  # Dockerfile (+ docker-compose.yaml) -> the words the reason must contain
    "gpu": ("FROM nvidia/cuda:12.4.0-runtime-ubuntu22.04\n", "", "needs a GPU"),
    "services": (
        "FROM python:3.11\n",
        "services:\n  client: {}\n  db: {image: postgres}\n",
        "needs services: client, db",
    ),
    "systemctl": ("FROM debian:bookworm\nRUN systemctl enable nginx\n", "", "running service"),
    "daemon": (
        'FROM debian:bookworm\nCMD ["nginx", "-g", "daemon off;"]\n',
        "",
        "service started by CMD",
    ),
    "qemu": ("FROM debian:bookworm\nRUN echo qemu-system-x86_64 -hda disk.img\n", "", "QEMU"),
    "apt": (
        "FROM debian:bookworm\nRUN apt-get update && apt-get install -y arcforge-no-pkg\n",
        "",
        "arcforge-no-pkg",  # layer: not on this host; real root: Unable to locate package
    ),
    "run-fails": (
        "FROM python:3.12\nRUN echo building && python3 -c 'raise SystemExit(3)'\n",
        "",
        "failed (exit 3)",
    ),
    "copy-missing": ("FROM python:3.12\nCOPY nope.txt /app/\n", "", "nope.txt is not in the build"),
    "user": ("FROM python:3.12\nUSER app\n", "", "USER app"),
}


@needs_bwrap
@pytest.mark.parametrize("name", sorted(UNBUILDABLE))
def test_container_mode_names_what_cannot_be_built(tmp_path, name):
    dockerfile, compose, needle = UNBUILDABLE[name]
    root = tmp_path / name
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text("instruction: Do it.\n")
    (root / "Dockerfile").write_text(dockerfile)
    if compose:
        (root / "docker-compose.yaml").write_text(compose)
    (root / "run-tests.sh").write_text("exit 0\n")
    task = import_task_dir(root)
    reasons = " | ".join(task.metadata["unsupported"])
    assert needle in reasons and "root_layer" not in task.context, reasons
    with pytest.raises(ValueError, match="unsupported"):
        TerminalEnv().reset(task)


@needs_bwrap
def test_container_mode_reports_downloads_at_solve_time(tmp_path):
    root = tmp_path / "fetches"
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text("instruction: Do it.\n")
    (root / "Dockerfile").write_text("FROM python:3.12\nWORKDIR /app\n")
    (root / "run-tests.sh").write_text("wget -q https://example.com/golden.tar\npytest $TEST_DIR\n")
    reasons = " | ".join(import_task_dir(root).metadata["unsupported"])
    assert "downloads at solve time: wget -q https://example.com/golden.tar" in reasons, reasons


@needs_bwrap
def test_binary_test_data_reaches_the_verifier_byte_for_byte(tmp_path):
    import shutil

    root = tmp_path / "binary-data"
    shutil.copytree(FIXTURES / "harbor/hello-world", root)
    data = b"\xff\xfe\x00" + b"Hello, world!\n"  # not UTF-8: a held-out data file
    (root / "tests" / "expected.bin").write_bytes(data)
    (root / "tests" / "test_state.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_hello_matches_the_data_file():\n"
        "    want = Path(__file__).with_name('expected.bin').read_bytes()[3:]\n"
        "    assert Path('/app/hello.txt').read_bytes() == want\n"
    )
    task = import_task_dir(root)
    assert not task.metadata.get("unsupported")
    carried = task.metadata["test_files"]["expected.bin"]
    assert isinstance(carried, dict) and "base64" in carried
    assert check_task(root)["reward"] == 1.0
    assert check_task(root, empty=True)["reward"] == 0.0
