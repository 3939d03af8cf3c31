"""Git plumbing for SWE synthesis: fix-commit candidates, test/code split, trees, bug commits.

Everything reads the repository through git commands and never touches its working tree or
its refs, except `commit_tree`, which writes objects and one ref under refs/arcforge/ (used on
the synthesis's own clone for synthetic-bug base commits). Test files are told from code by
path with the same rule the SWE grader protects (`swe_env.is_protected`: test_*.py, *_test.py,
anything under tests/ test/ testing/, conftest.py and pytest configuration).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from arcforge.envs.swe_env import _GIT_ENV, is_protected
from arcforge.errors import UserError


def git(
    repo: str | Path,
    *args: str,
    stdin: bytes | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> str:
    """Run git in `repo`; stdout as text. A failure raises RuntimeError with git's stderr."""
    full = {**os.environ, **_GIT_ENV, **(env or {})}
    res = subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=repo,
        input=stdin,
        capture_output=True,
        env=full,
    )
    if check and res.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed in {repo}: {res.stderr.decode(errors='replace')[-400:]}"
        )
    return res.stdout.decode(errors="replace")


def check_repo(path: str | Path) -> Path:
    """The repository's top directory, or UserError naming what is wrong."""
    p = Path(path)
    if not p.is_dir():
        raise UserError(f"--repo {p}: no such directory")
    res = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "--show-toplevel"],
        cwd=p,
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise UserError(f"--repo {p}: not a git repository ({res.stderr.strip()[:120]})")
    return Path(res.stdout.strip())


def is_test_path(rel: str) -> bool:
    """Test-side files: tests, conftests and pytest configuration (see the module header)."""
    return is_protected(rel) and not rel.endswith((".pth", ".pyc"))


@dataclass
class FixCommit:
    """A commit that changes both code and tests: base = its parent."""

    sha: str
    base: str
    message: str
    code_files: list[str]
    test_files: list[str]
    date: str


def fix_commits(
    repo: str | Path, rev: str = "HEAD", max_count: int = 200, max_files: int = 20
) -> list[FixCommit]:
    """Non-merge commits reachable from `rev` that change both code (.py) and test files, oldest
    first. Commits touching more than `max_files` files are skipped (refactors, imports)."""
    log = git(repo, "log", "--no-merges", f"--max-count={max_count}", "--format=%H %P", rev)
    out = []
    for line in reversed(log.splitlines()):
        parts = line.split()
        if len(parts) != 2:  # root commit (no parent)
            continue
        sha, parent = parts
        names = git(repo, "diff", "--name-only", "--no-renames", parent, sha).split()
        tests = [n for n in names if is_test_path(n)]
        code = [n for n in names if not is_test_path(n) and n.endswith(".py")]
        if tests and code and len(names) <= max_files:
            msg = git(repo, "show", "-s", "--format=%B", sha).strip()
            date = git(repo, "show", "-s", "--format=%cI", sha).strip()
            out.append(FixCommit(sha, parent, msg, code, tests, date))
    return out


def resolve_commit(repo: str | Path, rev: str) -> str:
    """The full sha of `rev`, or UserError naming it."""
    res = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip()
    if not res:
        raise UserError(f"--commit {rev}: no such commit in {repo}")
    return res


def commit_info(repo: str | Path, sha: str) -> FixCommit:
    """One commit as a candidate: base = its first parent; code/test files split by path."""
    parents = git(repo, "show", "-s", "--format=%P", sha).split()
    if not parents:
        raise UserError(f"commit {sha[:12]} is a root commit: it has no parent to use as base")
    names = git(repo, "diff", "--name-only", "--no-renames", parents[0], sha).split()
    msg = git(repo, "show", "-s", "--format=%B", sha).strip()
    date = git(repo, "show", "-s", "--format=%cI", sha).strip()
    tests = [n for n in names if is_test_path(n)]
    code = [n for n in names if not is_test_path(n) and n.endswith(".py")]
    return FixCommit(sha, parents[0], msg, code, tests, date)


def range_commits(repo: str | Path, spec: str) -> list[str]:
    """Every non-merge commit of the range `A..B` (oldest first), or UserError."""
    if ".." not in spec:
        raise UserError(f"--commits {spec}: expected a range A..B")
    for end in spec.replace("...", "..").split(".."):
        ok = git(
            repo, "rev-parse", "--verify", "--quiet", f"{end or 'HEAD'}^{{commit}}", check=False
        )
        if not ok.strip():
            raise UserError(f"--commits {spec}: {end!r} is not a commit in {repo}")
    return git(repo, "rev-list", "--reverse", "--no-merges", spec).split()


def split_diff(repo: str | Path, base: str, head: str) -> tuple[str, str]:
    """(patch, test_patch): the code part and the test part of `git diff base head`."""
    names = git(repo, "diff", "--name-only", "--no-renames", base, head).split()
    tests = [n for n in names if is_test_path(n)]
    code = [n for n in names if not is_test_path(n)]
    patch = git(repo, "diff", "--no-renames", "--binary", base, head, "--", *code) if code else ""
    tpatch = (
        git(repo, "diff", "--no-renames", "--binary", base, head, "--", *tests) if tests else ""
    )
    return patch, tpatch


def patch_files(patch: str) -> list[str]:
    """Paths a unified diff touches (its b/ side)."""
    return sorted(
        {
            ln.split(" b/", 1)[1]
            for ln in patch.splitlines()
            if ln.startswith("diff --git a/") and " b/" in ln
        }
    )


def export_tree(repo: str | Path, commit: str, dst: Path) -> Path:
    """Write `commit`'s tree (no .git) into `dst`."""
    dst.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(
        ["git", "-c", "safe.directory=*", "archive", "--format=tar", commit],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=tar, check=True)
    return dst


def apply_patch(tree: Path, patch: str) -> str | None:
    """Apply a unified diff inside `tree` (not a repository); None, or git's error text."""
    if not patch.strip():
        return None
    res = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"],
        cwd=tree,
        input=patch.encode(),
        capture_output=True,
    )
    return None if res.returncode == 0 else res.stderr.decode(errors="replace")[-400:]


def commit_tree(
    repo: str | Path, parent: str, files: dict[str, str], message: str, ref: str
) -> str:
    """A commit = `parent`'s tree with `files` replaced, made with plumbing (no checkout) and
    kept alive by `ref` (e.g. refs/arcforge/bugs/<id>). Returns its sha."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", parent, env=env)
        for rel, text in files.items():
            blob = git(repo, "hash-object", "-w", "--stdin", stdin=text.encode()).strip()
            mode = (git(repo, "ls-tree", parent, "--", rel).split() or ["100644"])[0]
            git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{rel}", env=env)
        tree = git(repo, "write-tree", env=env).strip()
    sha = git(repo, "commit-tree", tree, "-p", parent, "-m", message).strip()
    git(repo, "update-ref", ref, sha)
    return sha


def clone(src: str | Path, dst: Path) -> Path:
    """A local clone of `src` (no checkout) that synthesis may add refs to; reused if present."""
    if (dst / "HEAD").exists() or (dst / ".git").exists():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    git(
        dst.parent,
        "clone",
        "-q",
        "--no-checkout",
        "--no-hardlinks",
        str(Path(src).resolve()),
        str(dst),
    )
    return dst
