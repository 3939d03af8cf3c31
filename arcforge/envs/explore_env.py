"""ExploreEnv: navigate a repository with list/read tools to find a described source file.

The repository is one of the world's (files, tests and README, held in memory: listing and
reading need no sandbox, nothing is executed). Tools: `list_files(path)` lists the files under a
directory, `read_file(path)` returns a file's text; both are plain typed functions, so a wrong
path is an error observation, never an exception. The episode ends with a reply without tool
calls. Reward (scored on the files opened, CC-Bench style): 1.0 iff the target file was read
and at most `metadata["max_reads"]` distinct files were read, so opening everything fails.
Details: files read, the target, the answered path.
"""

from __future__ import annotations

from collections.abc import Iterable

from arcforge.envs.base import Env
from arcforge.rewards.math import extract_answer
from arcforge.types import Message, Reward, Task, Tool
from arcforge.world.code.repos import Repo


class ExploreEnv(Env):
    """Find-the-file tasks over the world's repos.

    Args:
        repos: the repositories tasks may name (`task.context["repo"]`).
    """

    def __init__(self, repos: Iterable[Repo]) -> None:
        super().__init__()
        self.repos = {r.name: r for r in repos}
        self.files: dict[str, str] = {}
        self.opened: list[str] = []

    def check(self, task: Task) -> None:
        name = task.context.get("repo")
        if name not in self.repos:
            raise ValueError(f"task {task.id}: repo {name!r} unknown; known: {sorted(self.repos)}")
        if not task.metadata.get("target"):
            raise ValueError(f"task {task.id}: an explore task needs metadata['target']")

    def start(self, task: Task) -> list[Message]:
        r = self.repos[task.context["repo"]]
        self.files = {**r.files, **r.tests, "README.md": f"# {r.name}\n\n{r.description}\n"}
        self.opened = []
        self.tools = [
            Tool.from_function(self.list_files, "list_files"),
            Tool.from_function(self.read_file, "read_file"),
        ]
        return self.opening(task)

    def list_files(self, path: str = "") -> str:
        """List the repository's files under a directory.

        Args:
            path: a directory relative to the repository root; empty for the whole repository.
        """
        prefix = path.strip("/").removeprefix("./")
        prefix = f"{prefix}/" if prefix and prefix != "." else ""
        hits = sorted(p for p in self.files if p.startswith(prefix))
        if not hits:
            raise ValueError(f"no files under {path!r}; try list_files with an empty path")
        return "\n".join(hits)

    def read_file(self, path: str) -> str:
        """Return the text of one file of the repository.

        Args:
            path: the file's path relative to the repository root, as list_files shows it.
        """
        key = path.strip().removeprefix("./").lstrip("/")
        if key not in self.files:
            raise ValueError(f"no file {path!r}; list_files shows the paths")
        if key not in self.opened:
            self.opened.append(key)
        return self.files[key]

    def verify(self) -> Reward:
        if self.task is None:
            return Reward(0.0, {"error": "no episode"})
        target = self.task.metadata["target"]
        limit = int(self.task.metadata.get("max_reads", 2))
        found = target in self.opened
        ok = found and len(self.opened) <= limit
        answer = extract_answer(self.reply) if self.reply else None
        details = {
            "opened": list(self.opened),
            "target": target,
            "found": found,
            "within_limit": len(self.opened) <= limit,
            "answer": answer,
        }
        return Reward(1.0 if ok else 0.0, details)
