"""Mid-training data: the staged context schedule, repo-level sequences, long-context documents,
and the weighted mixture of them.

- Context schedule: a list of `ContextStage(seq_len, tokens, rope_theta)` run in order (GLM-5's
  4K -> 32K -> 128K extension, scaled down); the context never shrinks.
- Repo-level sequences: a repository's files, an issue and the diff that fixes it in one
  document, so the model sees code at repository scope next to the change an issue asked for.
  From any local git repository each commit that touches code gives one: its message is the
  issue, its patch is the diff, and the touched files are shown as they were *before* the commit
  (the state the issue is about; files the commit creates appear only in the diff).
- Long context: natural (long documents concatenated to a target length) and synthetic (items
  whose text hides facts far apart, closed by questions each followed by its answer).
- `build_midtrain_docs` mixes named ingredients by weight over a character budget.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

CODE_EXTS: tuple[str, ...] = (
    ".py",
    ".pyi",
    ".js",
    ".ts",
    ".tsx",
    ".c",
    ".h",
    ".cc",
    ".cpp",
    ".hpp",
    ".rs",
    ".go",
    ".java",
    ".kt",
    ".rb",
    ".sh",
    ".toml",
    ".cfg",
    ".ini",
    ".yaml",
    ".yml",
    ".json",
)


class ContextStage(BaseModel):
    """One step of the context schedule: train `tokens` tokens at `seq_len` with `rope_theta`."""

    seq_len: int = Field(gt=0)
    tokens: int = Field(gt=0)
    rope_theta: float = Field(gt=0)


def validate_schedule(stages: Sequence[ContextStage | dict[str, Any]]) -> list[ContextStage]:
    """Check a context schedule: non-empty, tokens > 0, seq_len never decreasing.

    Returns the stages as ContextStage; raises ValueError naming the offending stage.
    """
    if not stages:
        raise ValueError("the context schedule is empty")
    out: list[ContextStage] = []
    for i, s in enumerate(stages):
        try:
            stage = s if isinstance(s, ContextStage) else ContextStage(**s)
        except (TypeError, ValueError) as e:
            raise ValueError(f"context stage {i}: {e}") from e
        if out and stage.seq_len < out[-1].seq_len:
            raise ValueError(
                f"context stage {i}: seq_len {stage.seq_len} < previous {out[-1].seq_len} "
                "(the schedule may only extend the context)"
            )
        out.append(stage)
    return out


# ---------------------------------------------------------------- repo-level sequences


def repo_sequence(files: dict[str, str], issue: str | None, diff: str | None) -> str:
    """All files (sorted by path, each under a path header), then the issue, then the diff."""
    parts = [
        f"<file path={path}>\n{text.rstrip()}\n</file>" for path, text in sorted(files.items())
    ]
    if issue:
        parts.append(f"<issue>\n{issue.strip()}\n</issue>")
    if diff:
        parts.append(f"<diff>\n{diff.strip()}\n</diff>")
    return "\n".join(parts) + "\n"


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "core.quotepath=false", *args],
        capture_output=True,
        check=False,
    )
    if out.returncode != 0:
        err = out.stderr.decode("utf-8", "replace").strip()
        raise ValueError(f"git {' '.join(args[:2])} failed in {repo}: {err}")
    return out.stdout.decode("utf-8", "replace")


@dataclass
class _Commit:
    sha: str
    parents: list[str]
    message: str
    diff: str


def _log(repo: Path, max_commits: int | None) -> list[_Commit]:
    """Parse `git log -p` (oldest first); NUL bytes frame each commit's header fields."""
    args = [
        "log",
        "-p",
        "--reverse",
        "--no-color",
        "--no-ext-diff",
        "--format=%x00%H%x00%P%x00%B%x00",
    ]
    parts = _git(repo, *args).split("\x00")[1:]  # groups of 4: sha, parents, message, diff
    commits = [
        _Commit(sha, ps.split(), msg.strip(), diff.strip("\n"))
        for sha, ps, msg, diff in zip(
            parts[0::4], parts[1::4], parts[2::4], parts[3::4], strict=True
        )
    ]
    return commits[-max_commits:] if max_commits else commits


def git_repo_sequences(
    repo_path: str | Path,
    code_exts: Sequence[str] = CODE_EXTS,
    max_commits: int | None = None,
    max_file_chars: int = 20_000,
) -> list[str]:
    """One repo-level sequence per commit of a local git repository that changes code.

    Args:
        repo_path: any local git working copy.
        code_exts: a commit qualifies if it touches a file with one of these suffixes.
        max_commits: only the most recent commits (None: all).
        max_file_chars: files longer than this are left out of the file section.

    Returns:
        Sequences in commit order (oldest first), see `repo_sequence`.
    """
    repo = Path(repo_path)
    if not (repo / ".git").exists():
        raise ValueError(f"not a git repository: {repo}")
    seqs = []
    for c in _log(repo, max_commits):
        if not c.diff:  # merges and empty commits carry no patch
            continue
        touched = _git(repo, "diff-tree", "-r", "--root", "--no-commit-id", "--name-only", c.sha)
        paths = [p for p in touched.splitlines() if p]
        if not any(p.endswith(tuple(code_exts)) for p in paths):
            continue
        files = {}
        if c.parents:
            present = set(_git(repo, "ls-tree", "-r", "--name-only", c.parents[0]).splitlines())
            for p in paths:
                if p in present:
                    text = _git(repo, "show", f"{c.parents[0]}:{p}")
                    if len(text) <= max_file_chars:
                        files[p] = text
        seqs.append(repo_sequence(files, c.message, c.diff))
    return seqs


# ---------------------------------------------------------------- long context


@dataclass(frozen=True)
class LongItem:
    """A long text whose facts a closing question needs."""

    text: str
    question: str
    answer: str


def natural_long_docs(texts: Sequence[str], target_chars: int, sep: str = "\n\n") -> list[str]:
    """Concatenate documents in order into documents of at least `target_chars` characters.

    A final remainder shorter than target_chars / 2 is dropped.
    """
    out, cur, size = [], [], 0
    for t in texts:
        cur.append(t)
        size += len(t) + len(sep)
        if size >= target_chars:
            out.append(sep.join(cur))
            cur, size = [], 0
    if cur and size >= target_chars / 2:
        out.append(sep.join(cur))
    return out


def synthetic_long_doc(items: Sequence[Any]) -> str:
    """Render items (LongItem, or anything with text/question/answer, or 3-tuples) as one
    document: every text first, then each question immediately followed by its answer."""
    triples = [it if isinstance(it, tuple) else (it.text, it.question, it.answer) for it in items]
    body = "\n\n".join(t for t, _, _ in triples)
    qa = "\n".join(f"Question: {q}\nAnswer: {a}" for _, q, a in triples)
    return f"{body}\n\n{qa}\n"


# ---------------------------------------------------------------- the mixture


@dataclass
class Ingredient:
    """A named pool of mid-training documents with a mixture weight (share of characters)."""

    name: str
    docs: list[str]
    weight: float = 1.0


@dataclass
class MidtrainMix:
    """The mixed documents (shuffled) and the characters each ingredient contributed."""

    docs: list[str] = field(default_factory=list)
    chars: dict[str, int] = field(default_factory=dict)


def build_midtrain_docs(
    ingredients: Sequence[Ingredient], total_chars: int, seed: int
) -> MidtrainMix:
    """Draw about `total_chars` characters, each ingredient its weight's share.

    Each ingredient walks a seeded permutation of its documents (a new permutation when it runs
    out, so documents repeat only after all were used) until its share is reached; the last
    document may overshoot the share. The result is shuffled with the same seed.
    """
    live = [g for g in ingredients if g.weight > 0]
    if not live:
        raise ValueError("build_midtrain_docs needs an ingredient with weight > 0")
    empty = [g.name for g in live if not any(g.docs)]
    if empty:
        raise ValueError(f"midtrain ingredient(s) without documents: {empty}")
    rng = random.Random(seed)
    total_w = sum(g.weight for g in live)
    mix = MidtrainMix()
    for g in live:
        budget, got, pool = total_chars * g.weight / total_w, 0, []
        while got < budget:
            if not pool:
                pool = [d for d in g.docs if d]
                rng.shuffle(pool)
            doc = pool.pop()
            mix.docs.append(doc)
            got += len(doc)
        mix.chars[g.name] = got
    rng.shuffle(mix.docs)
    return mix
