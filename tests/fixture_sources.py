"""Python functions that several tests build their fixture sources from, each written once
(tests/synth/swe_repo.py, tests/synth/test_swe_real.py, tests/world/test_mutations.py,
tests/world/test_world_repos.py)."""

CLAMP = '''def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
'''

CLAMP_DOC = CLAMP.splitlines(keepends=True)[1]  # its docstring line

# the bug the SWE fixtures fix: lo above the range too
BUGGY_CLAMP = CLAMP.replace("        return hi\n", "        return lo\n")

# a caller (combo) of two helpers (double, bump), for bugs seen through a caller
DOUBLE_BUMP_COMBO = '''def double(x):
    """Return 2x."""
    return x + x


def bump(x):
    """Return x + 1."""
    return x + 1


def combo(x):
    """Return double(x) plus bump(x)."""
    first = double(x)
    second = bump(x)
    return first + second
'''
