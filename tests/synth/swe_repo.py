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

OPS_V1 = '''"""Small numeric helpers."""


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return lo
    return x


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


def _git(repo: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def commit(repo: Path, files: dict[str, str], message: str) -> None:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def build_repo(root: Path) -> Path:
    repo = root / "mathlib-repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
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
