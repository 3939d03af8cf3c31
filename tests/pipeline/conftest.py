"""The uninterrupted smoke run the pipeline tests share: `configs/smoke.yaml` through the real
CLI (world, tokenizer, every stage, evaluation, report), made once per test session."""

from pathlib import Path

import pytest
from child_runs import run_cli


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("smoke")
    r = run_cli("run", "configs/smoke.yaml", "--run-dir", str(run_dir), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "report:" in r.stdout
    return run_dir
