"""This interpreter run as a child process in the repository root (the real CLI, or a script),
its output captured as text: how the pipeline tests start their runs."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quiet_env(**variables: str) -> dict[str, str]:
    """This process's environment with progress bars off (ARCFORGE_PROGRESS=0), `variables` set."""
    return {**os.environ, "ARCFORGE_PROGRESS": "0", **variables}


def run_python(
    *args: str, timeout: float, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """`python ARGS` in the repository root with `stdin` as its input; `env` defaults to
    `quiet_env()`."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=quiet_env() if env is None else env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(*args: str, timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`arcforge ARGS` as `python -m arcforge.cli ARGS` (see run_python)."""
    return run_python("-m", "arcforge.cli", *args, timeout=timeout, stdin=stdin)
