"""A small git repository built commit by commit for the SWE synthesis tests.

History (oldest first):
  1 initial         mathlib/ops.py (clamp, mean, word_count) + tests/test_ops.py
  2 fix clamp       clamp returned lo above the range; fix + a new test      -> instance
  3 docs            README only                                             (not a candidate)
  4 add median      new function + new test file                            -> instance
  5 flaky timing    code + a test whose outcome alternates between runs     -> dropped (flaky)
  6 refactor mean   code + a renamed test that passes before and after      -> dropped (no F2P)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from fixture_sources import BUGGY_CLAMP

OPS_V1 = f'''"""Small numeric helpers."""


{BUGGY_CLAMP}

def mean(xs):
    """Arithmetic mean of a non-empty list."""
    return sum(xs) / len(xs)


def word_count(s):
    """Number of whitespace-separated words."""
    return len(s.split())
'''
TESTS_V1 = """from mathlib.ops import clamp, mean, word_count


def test_clamp_below():
    assert clamp(-5, 0, 10) == 0


def test_clamp_inside():
    assert clamp(4, 0, 10) == 4


def test_mean():
    assert mean([1, 2, 3, 6]) == 3


def test_word_count():
    assert word_count("a b  c") == 3
"""
CLAMP_TEST = """

def test_clamp_above():
    assert clamp(15, 0, 10) == 10
"""
MEDIAN = '''

def median(xs):
    """Middle value (mean of the two middle values for an even count)."""
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    if n % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2
'''
MEDIAN_TEST = """from mathlib.ops import median


def test_median_odd():
    assert median([3, 1, 2]) == 2


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5
"""
FLAKY_TEST = """from pathlib import Path

from mathlib.ops import word_count


def test_word_count_tabs():
    # alternates pass/fail between runs: a counter kept outside the restored workspace
    p = Path("/grading/.flaky-counter")
    n = int(p.read_text()) if p.exists() else 0
    p.write_text(str(n + 1))
    assert word_count("a\\tb") == 2 and n % 2 == 0
"""


def git(repo: Path, *args: str, date: str | None = None) -> str:
    """`git ARGS` in `repo` as author and committer "t", no global config; commits dated `date`
    when given (then the same files and messages give the same commit ids on every run).
    Returns its stdout."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    if date is not None:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    res = subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    )
    return res.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str, date: str | None = None) -> str:
    """Write `files` (path: text) into `repo` and commit them all; returns the commit id."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


def build_repo(root: Path) -> Path:
    repo = root / "mathlib-repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    commit(
        repo,
        {"mathlib/__init__.py": "", "mathlib/ops.py": OPS_V1, "tests/test_ops.py": TESTS_V1},
        "initial",
    )
    ops = OPS_V1.replace("    if x > hi:\n        return lo", "    if x > hi:\n        return hi")
    commit(
        repo,
        {"mathlib/ops.py": ops, "tests/test_ops.py": TESTS_V1 + CLAMP_TEST},
        "Fix clamp above the range\n\nclamp(15, 0, 10) returned 0 instead of 10.",
    )
    commit(repo, {"README.md": "mathlib\n"}, "docs")
    ops += MEDIAN
    commit(repo, {"mathlib/ops.py": ops, "tests/test_median.py": MEDIAN_TEST}, "Add median")
    ops = ops.replace("return len(s.split())", "return len(s.split())  # any whitespace")
    commit(repo, {"mathlib/ops.py": ops, "tests/test_flaky.py": FLAKY_TEST}, "Count tabs")
    ops = ops.replace("return sum(xs) / len(xs)", "total = sum(xs)\n    return total / len(xs)")
    tests = (TESTS_V1 + CLAMP_TEST).replace("def test_mean():", "def test_mean_of_four():")
    commit(repo, {"mathlib/ops.py": ops, "tests/test_ops.py": tests}, "Refactor mean")
    return repo
