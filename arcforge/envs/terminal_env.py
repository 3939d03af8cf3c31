"""TerminalEnv: a shell task in a bwrap sandbox, graded by a hidden verify script.

An episode: `reset(task)` opens a sandbox, writes the task's files and runs its init script in
/workspace; the agent works with `bash`, `view_file` and `edit_file`; an assistant message
without tool calls ends the episode (its ```bash blocks, if any, are run first: that is how the
world's SFT demos answer). `verify()` copies the verify script and the task's test files into
/grading only then (agent execs can never see or write /grading) and runs the script as a
grading exec in /workspace: exit code 0 = pass, or, when the task names a reward file (Harbor's
/logs/verifier/reward.txt, mapped to /grading/logs/verifier/reward.txt), the number in it.

Task fields read: context["init_script"], context["files"] {workspace path: text},
context["env"] {name: value}; validation.verify_script; metadata["test_files"] {path under the
tests dir: text, or {"base64": ...} for a binary file}, metadata["reward_file"], metadata["unsupported"] (reasons; reset refuses).
Imported Terminal-Bench / Harbor tasks come in one of two modes (see importers.py): with
context["root_layer"] (container mode, the default for a task with a Dockerfile) the sandbox is
a container-like root over that cached layer (uid 0, cwd the WORKDIR, /app, /tests, /logs as
the scripts expect; arcforge.sandbox.root), or with context["rootfs_image"] a real root seen
through a copy-on-write view (arcforge.sandbox.rootfs_sandbox), either rebuilt from context["dockerfile"]
if the cache was cleared; otherwise /app, /tests and /logs arrive rewritten to /workspace,
/grading/tests and /grading/logs.

This module also holds the file and shell tools SWEEnv reuses (`sandbox_tools`).
Simplification: the verify script runs code in the agent's workspace (as Terminal-Bench does);
what it checks is the workspace state the agent was asked to produce.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import shlex
from pathlib import Path
from typing import Any

from arcforge.envs.base import Env, StepResult
from arcforge.sandbox import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    host_site_packages,
    open_sandbox,
)
from arcforge.sandbox.rootfs_build import build_image, load_image
from arcforge.sandbox.rootfs_sandbox import RootfsImage, RootfsSandbox
from arcforge.sandbox.types import RootLayer
from arcforge.types import Message, Reward, Task, Tool

CONTAINER_MEMORY_MB = 4096  # per process in a task container that names no memory of its own
# processes and threads of a task container (RLIMIT_NPROC, counted per host uid, which every
# real-root sandbox shares): a browser or a JVM starts dozens of threads; Docker sets no limit
CONTAINER_PROCESSES = 4096
PYSITE = "/opt/pysite"  # where the host's pure-Python packages (pytest) appear inside
TESTS_DIR = "/grading/tests"
_FENCE = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def fenced_blocks(text: str, langs: tuple[str, ...]) -> list[str]:
    """Bodies of the ```lang blocks in `text` whose language is one of `langs`."""
    return [body for lang, body in _FENCE.findall(text or "") if lang.lower() in langs]


def format_exec(res: ExecResult) -> str:
    """One observation for an exec: stdout, stderr, and a status line when it did not succeed."""
    out = res.stdout
    if res.stderr:
        out += ("" if not out or out.endswith("\n") else "\n") + res.stderr
    if res.timed_out:
        out += f"\n[timed out after {res.duration:.1f}s]"
    elif res.exit_code != 0:
        out += f"\n[exit code {res.exit_code}]"
    return out if out.strip() else "(no output)"


def open_task_sandbox(
    backend: str,
    limits: Limits,
    env: dict[str, str] | None = None,
    workspace: Any = None,
    root: RootLayer | None = None,
    image: RootfsImage | None = None,
) -> Sandbox:
    """A sandbox with the host's pure-Python packages (pytest) on PYTHONPATH.

    Plugin autoloading is off: the bound site-packages is our own environment, whose pytest
    plugins are incidental to the task (and loading them doubles pytest's start-up time).
    `root`: a container-like root layer (bwrap only); `image`: a real-root task image
    (arcforge.sandbox.rootfs_sandbox; bwrap only)."""
    binds = {host_site_packages(): PYSITE}
    env = {"PYTHONPATH": PYSITE, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})}
    if image is not None:
        if backend != "bwrap":
            raise SandboxError(f"real-root task images run on the bwrap backend, not {backend}")
        return RootfsSandbox(image, limits, workspace, extra_ro_binds=binds, env=env)
    kw: dict[str, Any] = {"root": root} if root is not None else {}
    return open_sandbox(
        backend, workspace=workspace, limits=limits, extra_ro_binds=binds, env=env, **kw
    )


def task_root(task: Task) -> RootLayer | None:
    """The container-like root layer of a task in container mode (rebuilt when the cache was
    cleared); None for other tasks. Raises ValueError when the layer cannot be built."""
    path = task.context.get("root_layer")
    if not path:
        return None
    if (Path(path) / "layer.json").is_file():
        return RootLayer.load(path)
    from arcforge.sandbox.root import build_layer

    build = build_layer(
        task.context.get("dockerfile") or None, extra_pip=task.context.get("extra_pip") or []
    )
    if build.layer is None:
        raise ValueError(f"task {task.id} is unsupported here: {'; '.join(build.unsupported)}")
    return build.layer


def task_image(task: Task) -> RootfsImage | None:
    """The real-root image of a task imported as one (rebuilt
    when the cache was cleared); None for other tasks. Raises ValueError when it cannot be
    built."""
    path = task.context.get("rootfs_image")
    if not path:
        return None
    if (Path(path) / "image.json").is_file():
        return load_image(path)
    build = build_image(
        task.context.get("dockerfile") or None,
        extra_pip=task.context.get("extra_pip") or [],
        extra_apt=task.context.get("extra_apt") or [],
    )
    if build.image is None:
        raise ValueError(f"task {task.id} is unsupported here: {'; '.join(build.unsupported)}")
    return build.image


def test_file_content(content: str | dict) -> str | bytes:
    """A test file as metadata["test_files"] carries it: text, or {"base64": ...} for a binary
    file."""
    if isinstance(content, dict):
        return base64.b64decode(content["base64"])
    return content


def python_tool(sb: Sandbox, timeout: float, name: str, summary: str) -> Tool:
    """A tool `name(code)` that runs a Python program in `sb` and returns what it printed."""

    def run(code: str) -> str:
        return format_exec(sb.exec("python3 -", stdin=code, timeout=timeout))

    run.__doc__ = f"{summary}\n\nArgs:\n    code: the program source.\n"
    return Tool.from_function(run, name=name)


def sandbox_tools(sb: Sandbox, timeout: float) -> dict[str, Tool]:
    """bash, view_file, edit_file and search_code bound to one sandbox."""

    def bash(command: str) -> str:
        """Run a bash command in the working directory (/workspace) and return its output.

        Args:
            command: the command line to run.
        """
        return format_exec(sb.exec(command, timeout=timeout))

    def view_file(path: str) -> str:
        """Return the contents of a file.

        Args:
            path: file path, relative to /workspace or absolute under /workspace.
        """
        try:
            return sb.read_file(path)
        except SandboxError as err:
            return f"error: cannot read {path}: {err}"

    def edit_file(path: str, old: str, new: str) -> str:
        """Replace the exact text `old` with `new` in a file; `old` must occur exactly once.

        Args:
            path: file path, relative to /workspace.
            old: the exact text to replace (include enough context to make it unique).
            new: the replacement text.
        """
        if not old:
            return "error: old must not be empty"
        try:
            text = sb.read_file(path)
        except SandboxError as err:
            return f"error: cannot read {path}: {err}"
        n = text.count(old)
        if n != 1:
            why = "not found" if n == 0 else f"found {n} times; include more context"
            return f"error: old text {why} in {path}"
        sb.write_file(path, text.replace(old, new, 1))
        return f"ok: edited {path}"

    def search_code(pattern: str) -> str:
        """Search the files under /workspace for a regular expression (grep -E).

        Args:
            pattern: extended regular expression.
        """
        cmd = f"grep -rnIE --exclude-dir=.git -e {shlex.quote(pattern)} . | head -n 200"
        res = sb.exec(cmd, timeout=timeout)
        return res.stdout or res.stderr or "no matches"

    fns = (bash, view_file, edit_file, search_code)
    return {f.__name__: Tool.from_function(f) for f in fns}


class TerminalEnv(Env):
    """Shell tasks (world terminal scenarios, Terminal-Bench, Harbor). One sandbox per episode.

    Args:
        backend: sandbox backend ("bwrap"; "docker"; "local" is refused by open_sandbox).
        limits: per-exec limits for the agent's commands.
        tool_timeout: seconds per tool exec.
        verify_timeout: seconds for the verify script (a task's own value wins).
    """

    tool_names = ("bash", "view_file", "edit_file")

    def __init__(
        self,
        backend: str = "bwrap",
        limits: Limits | None = None,
        tool_timeout: float = 20,
        verify_timeout: float = 120,
    ):
        super().__init__()
        self.backend, self.limits = backend, limits or Limits(wall_time=verify_timeout)
        self.tool_timeout, self.verify_timeout = tool_timeout, verify_timeout
        self.init_info: dict[str, Any] = {}  # the init script's exit code and output

    def check(self, task: Task) -> None:
        reasons = task.metadata.get("unsupported") or []
        if reasons:
            raise ValueError(f"task {task.id} is unsupported here: {'; '.join(reasons)}")

    def start(self, task: Task) -> list[Message]:
        """Open a fresh sandbox, write the task's files, run its init script."""
        self.init_info = {}
        limits = self.limits
        if task.context.get("rootfs_image"):  # a container: the task's memory, else 4 GiB
            mem = max(limits.memory_mb, int(task.metadata.get("memory_mb") or CONTAINER_MEMORY_MB))
            procs = max(limits.max_processes, CONTAINER_PROCESSES)
            limits = dataclasses.replace(limits, memory_mb=mem, max_processes=procs)
        self.sb = open_task_sandbox(
            self.backend,
            limits,
            task.context.get("env"),
            root=task_root(task),
            image=task_image(task),
        )
        for path, text in (task.context.get("files") or {}).items():
            self.sb.write_file(path, text)
        init = task.context.get("init_script") or ""
        if init.strip():
            res = self.sb.exec(init, timeout=self.verify_timeout)
            self.init_info["init"] = {"exit_code": res.exit_code, "output": format_exec(res)}
        tools = sandbox_tools(self.sb, self.tool_timeout)
        self.tools = [tools[n] for n in self.tool_names]
        return self.opening(task)

    def finish(self, message: Message) -> StepResult:
        """A message without tool calls ends the episode; its bash blocks run as scripts."""
        self.reply = message.content
        outputs = [
            format_exec(self.run_script(b))
            for b in fenced_blocks(message.content, ("bash", "sh", "shell"))
        ]
        return StepResult([], True, {"final_scripts": outputs})

    def run_script(self, script: str) -> ExecResult:
        """Run a shell script as the agent would (no access to /grading; in the WORKDIR, as the
        image's USER; within the task's own agent timeout when it sets one); used by check."""
        assert self.sb is not None, "call reset(task) first"
        timeout = self.verify_timeout
        if self.task is not None and self.task.metadata.get("agent_timeout"):
            timeout = float(self.task.metadata["agent_timeout"])
        return self.sb.exec(script, timeout=timeout)

    def verify(self) -> Reward:
        """Copy the verify script and tests into /grading, run it there, read the verdict."""
        if self.sb is None or self.task is None:
            return Reward(0.0, {"error": "no episode"})
        v = self.task.validation
        if not v.verify_script:
            return Reward(0.0, {"error": f"task {self.task.id} has no verify script"})
        sb = self.sb
        sb.exec("rm -rf /grading/* && mkdir -p /grading/tests /grading/logs/verifier", grading=True)
        for rel, content in (self.task.metadata.get("test_files") or {}).items():
            sb.write_file(f"{TESTS_DIR}/{rel}", test_file_content(content))
        sb.write_file("/grading/verify.sh", v.verify_script, mode=0o755)
        timeout = float(self.task.metadata.get("verify_timeout") or self.verify_timeout)
        rooted = self.task.context.get("root_layer") or self.task.context.get("rootfs_image")
        tests_dir = "/tests" if rooted else TESTS_DIR
        env = {"TEST_DIR": tests_dir, **(self.task.context.get("env") or {})}
        res = sb.exec("bash /grading/verify.sh", timeout=timeout, env=env, grading=True)
        details: dict[str, Any] = {
            "exit_code": res.exit_code,
            "timed_out": res.timed_out,
            "output": format_exec(res)[-2000:],
            **self.init_info,
        }
        if self.task.metadata.get("resource_notes"):
            details["resource_notes"] = self.task.metadata["resource_notes"]
        reward_file = self.task.metadata.get("reward_file")
        if reward_file:
            score = _read_reward(sb, reward_file)
            if score is None:  # Harbor's other form: reward.json next to it
                score = _read_reward_json(sb, reward_file.rsplit(".", 1)[0] + ".json")
            details["reward_file"] = score
            return Reward(score if score is not None else 0.0, details)
        if self.task.metadata.get("parser_name") == "pytest":
            verdict = pytest_verdict(res.stdout + res.stderr)
            if verdict is not None:
                details["parser"] = "pytest"
                return Reward(1.0 if verdict else 0.0, details)
        return Reward(1.0 if res.ok else 0.0, details)


def pytest_verdict(output: str) -> bool | None:
    """Terminal-Bench 1's pytest parser: the `-rA` short summary's PASSED / FAILED / ERROR
    lines decide (every test passed, at least one); None when there is no summary."""
    states = re.findall(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) ", output, re.M)
    if not states:
        return None
    return "PASSED" in states and not any(st in ("FAILED", "ERROR") for st in states)


def _read_reward(sb: Sandbox, path: str) -> float | None:
    try:
        text = sb.read_file(path).strip()
        return max(0.0, min(1.0, float(text.split()[0])))
    except (SandboxError, ValueError, IndexError):
        return None


def _read_reward_json(sb: Sandbox, path: str) -> float | None:
    """Harbor's reward.json: its "reward" value, else the mean of its numeric values."""
    try:
        data = json.loads(sb.read_file(path))
    except (SandboxError, ValueError):
        return None
    if isinstance(data, (int, float)):
        vals = [float(data)]
    elif isinstance(data, dict):
        if isinstance(data.get("reward"), (int, float)):
            vals = [float(data["reward"])]
        else:
            vals = [float(v) for v in data.values() if isinstance(v, (int, float))]
    else:
        return None
    return max(0.0, min(1.0, sum(vals) / len(vals))) if vals else None
