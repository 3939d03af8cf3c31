"""Grading SWE-bench instances from real repositories: SWEEnv inside the instance's environment.

An instance in SWE-bench's schema names its repository state (`base_commit`), its environment
(`environment_setup_commit`; our instances add `install`, how it was built) and, in swebench 5,
its test command (`eval_script`, the pytest command between the official markers). `RepoSWEEnv`
is SWEEnv with the sandbox opened over that environment (swe_venv: the repository installed
editable at /workspace, its test dependencies, its pytest plugins) under `swe_limits`, the
limits synthesis validated the instance with. Grading itself is SWEEnv's (sanitise, hidden test
files, JUnit report of the FAIL_TO_PASS / PASS_TO_PASS files).

`instance_blockers` lists why an instance cannot be graded here: no local clone, a test command
that is not pytest (Django's runtests.py, SymPy's bin/test), a failed environment install.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from arcforge.envs.swe_env import SWEEnv, is_protected, offered_tools
from arcforge.envs.swe_tools import function_tools
from arcforge.envs.swe_venv import (
    EnvBuildError,
    InstallSpec,
    RepoEnv,
    ensure_env,
    needs_install,
    open_env_sandbox,
    swe_limits,
)
from arcforge.envs.terminal_env import sandbox_tools
from arcforge.types import Message, Task, Tool

START, END = ">>>>> Start Test Output", ">>>>> End Test Output"


def eval_command_files(script: str) -> list[str] | None:
    """The test files/ids of the pytest command between the markers of an eval script; None
    when there is no marked command or it is not pytest."""
    lines = script.splitlines()
    try:
        a = next(i for i, ln in enumerate(lines) if START in ln)
        b = next(i for i, ln in enumerate(lines) if END in ln and i > a)
    except StopIteration:
        return None
    for cmd in (ln.strip() for ln in lines[a + 1 : b]):
        words = cmd.split()
        if words and (words[0].endswith("pytest") or words[:3] == ["python", "-m", "pytest"]):
            return [w for w in words[1:] if not w.startswith("-") and w not in ("-m", "pytest")]
        if words and not words[0].startswith((":", "#", "echo")):
            return None
    return None


def instance_blockers(rec: dict[str, Any]) -> list[str]:
    """Why an instance record cannot be graded here (empty: it can)."""
    out = []
    clone = rec.get("repo_path")
    if not clone:
        out.append(
            f"no local clone of {rec.get('repo') or 'the repository'}: add "
            '"repo_path": "/path/to/clone" to the instance'
        )
    elif not Path(clone, ".git").exists():
        out.append(f"repo_path {clone} is not a git clone")
    script = rec.get("eval_script")
    if script and eval_command_files(script) is None:
        out.append("the instance's test command (eval_script) is not a pytest command")
    return out


def instance_env(clone: str | Path, commit: str, spec: InstallSpec) -> RepoEnv | None:
    """The environment an instance's tests run under (None: the host's pytest), built on first
    use. Raises EnvBuildError when the install fails."""
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-swe-env-"))
    try:
        tar = subprocess.run(
            ["git", "-c", "safe.directory=*", "archive", "--format=tar", commit],
            cwd=clone,
            capture_output=True,
        )
        if tar.returncode != 0:
            raise EnvBuildError(f"no commit {commit[:12]} in {clone}", tar.stderr.decode()[-400:])
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=tar.stdout, check=True)
        if not needs_install(tmp, spec):
            return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ensure_env(clone, commit, spec)


class RepoSWEEnv(SWEEnv):
    """SWEEnv whose sandbox runs under a repository environment (see the module docstring).

    Args:
        env: the environment (None: the host's pytest, /workspace on sys.path).
        backend: sandbox backend.
        timeout: seconds of a grading run (also its CPU limit).
    """

    def __init__(self, env: RepoEnv | None, backend: str = "bwrap", timeout: float = 300):
        super().__init__((), backend=backend, limits=swe_limits(timeout), verify_timeout=timeout)
        self.repo_env = env

    def start(self, task: Task) -> list[Message]:
        msgs = super().start(task)
        assert self.sb is not None and self.tmp is not None
        self.sb.close()
        self.sb = open_env_sandbox(
            self.backend,
            self.limits,
            self.repo_env,
            self.tmp / "work",
            {"PYTHONDONTWRITEBYTECODE": "1"},
        )
        tools = sandbox_tools(self.sb, self.tool_timeout)
        tools["run_tests"] = Tool.from_function(self._run_tests, name="run_tests")
        tools.update(function_tools(self.sb, self.tool_timeout, is_protected, task.instruction))
        self.tools = [tools[n] for n in offered_tools(task, self.tool_names)]
        return msgs


def task_env(task: Task, backend: str = "bwrap") -> RepoSWEEnv:
    """RepoSWEEnv for a task made from an instance (`metadata["swe_env"]`: its environment
    commit and install; `context["repo_path"]`: its clone), the environment built on first use."""
    spec, clone = task.metadata["swe_env"], task.context["repo_path"]
    repo_env = instance_env(clone, spec["commit"], InstallSpec.from_dict(spec["install"]))
    return RepoSWEEnv(repo_env, backend=backend)
