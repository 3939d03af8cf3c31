"""Repositories whose build backend writes files into the tree import in the sandbox.

hatch-vcs (like setuptools-scm) writes the package's `_version.py` into the source tree when
the package is built; the file is git-ignored, so a workspace made from the repository's
commits lacks it and `import pkg` fails with "No module named 'pkg._version'". The environment
build keeps what the backend generated and puts it into each workspace, as SWE-bench's
in-place install in /testbed leaves it there. Needs PyPI (hatchling and hatch-vcs are
installed from it when the environment is built) and bubblewrap.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from arcforge.envs.swe_venv import InstallSpec, ensure_env, open_env_sandbox, swe_limits
from arcforge.sandbox.bwrap import bwrap_available

PYPROJECT = """[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "vcsdemo"
dynamic = ["version"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.hooks.vcs]
version-file = "src/vcsdemo/_version.py"
"""


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.slow
@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
def test_hatch_vcs_version_file_reaches_the_workspace(tmp_path, monkeypatch):
    envs = Path(tempfile.mkdtemp(prefix="arcforge-test-envs-"))  # the sandbox uid reads it
    envs.chmod(0o755)
    monkeypatch.setenv("ARCFORGE_SWE_ENVS", str(envs))
    repo = tmp_path / "repo"
    (repo / "src/vcsdemo").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / ".gitignore").write_text("src/vcsdemo/_version.py\n")
    (repo / "src/vcsdemo/__init__.py").write_text("from ._version import __version__\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    git(repo, "tag", "v1.2.3")
    commit = git(repo, "rev-parse", "HEAD")
    env = ensure_env(repo, commit, InstallSpec())
    work = tmp_path / "work"
    subprocess.run(
        f"git -C {repo} archive HEAD | tar -x -C {work}", shell=True, check=True
    ) if work.mkdir() is None else None
    assert not (work / "src/vcsdemo/_version.py").exists()  # what a workspace starts as
    sb = open_env_sandbox("bwrap", swe_limits(60), env, work)
    try:
        res = sb.exec("python3 -c 'import vcsdemo; print(vcsdemo.__version__)'", cwd="/workspace")
    finally:
        sb.close()
        shutil.rmtree(envs, ignore_errors=True)
    assert res.ok, res.stdout + res.stderr
    assert res.stdout.strip() == "1.2.3"
