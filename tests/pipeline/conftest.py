"""The uninterrupted smoke run the pipeline tests share: `configs/smoke.yaml` through the real
CLI (world, tokenizer, every stage, evaluation, report), made once per test session."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("smoke")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "arcforge.cli",
            "run",
            "configs/smoke.yaml",
            "--run-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        env={**os.environ, "ARCFORGE_PROGRESS": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "report:" in r.stdout
    return run_dir
