"""Repository-exploration tasks: find the file that implements a behaviour described in words.

CC-Bench's long-horizon check: can the agent, given only a semantic description (no function or
file name), locate and read the right source file of a repository? Each task names a world repo
and describes one of its functions by its docstring ("returns the sum of the values of xs that
are odd"); the target is the module that defines it. Held-out tasks use only held-out repos
(built from held-out functions), whose module file names are drawn per repo. Scoring (ExploreEnv) looks
at the files the agent opened, so reading every file does not pass: at most `max_reads`
distinct files may be opened.
"""

from __future__ import annotations

import ast
import random

from arcforge.types import Task
from arcforge.world.code.repos import Repo


def _describe(doc: str) -> str:
    """'Return how many ...' -> 'returns how many ...' (a behaviour, not a name)."""
    first = doc.split(" ", 1)
    verb = first[0].lower()
    return (verb + "s " if verb == "return" else verb + " ") + (first[1] if len(first) > 1 else "")


def explore_targets(repo: Repo) -> list[tuple[str, str, str]]:
    """(module path, function name, docstring) of every documented top-level function."""
    out = []
    for path, src in sorted(repo.files.items()):
        for node in ast.parse(src).body:
            doc = ast.get_docstring(node) if isinstance(node, ast.FunctionDef) else None
            if doc and doc.startswith("Return ") and "(" not in doc.split(" ", 2)[1]:
                out.append((path, node.name, doc))  # a composite's doc names functions: skip
    return out


def explore_task(repo: Repo, path: str, name: str, doc: str, max_reads: int = 2) -> Task:
    what = _describe(doc).rstrip(".")
    ins = (
        f"The repository {repo.name} is checked out. Without being told any file name, find "
        f"the source file that implements the function which {what}. Use list_files and "
        f"read_file (open at most {max_reads} files), then reply 'Answer: <path>'."
    )
    return Task(
        "",
        "explore",
        ins,
        context={"repo": repo.name},  # type: ignore[arg-type]
        tools=["list_files", "read_file"],
        difficulty=0.5,
        metadata={"target": path, "function": name, "max_reads": max_reads},
    )


def explore_tasks(repos: list[Repo], seed: int, n: int, split: str = "test") -> list[Task]:
    """Up to `n` exploration tasks over the repos of `split`, one per module file (so each item
    has its own answer), a pure function of (seed, split)."""
    rng = random.Random(f"{seed}:explore:{split}")
    pool = [(r, *target) for r in repos if r.split == split for target in explore_targets(r)]
    rng.shuffle(pool)
    pool = list({(r.name, path): (r, path, name, doc) for r, path, name, doc in pool}.values())
    out = []
    for i, (repo, path, name, doc) in enumerate(pool[:n]):
        t = explore_task(repo, path, name, doc)
        t.id, t.split, t.source = f"explore-{split}-{i:05d}", split, "world:explore"
        out.append(t)
    return out
