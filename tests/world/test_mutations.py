"""Bug mutations: every kind yields a real bug on small sources; multi-line and cross-function
shapes; no mutant can hang; the same source always gives the same candidates."""

import ast

import pytest
from fixture_sources import CLAMP, DOUBLE_BUMP_COMBO

from arcforge.world.code.codelib import load_source
from arcforge.world.code.mutations import KINDS, mutations

SRC = f'''"""Small helpers (docstrings may hold non-ASCII text: café)."""


def total_above(xs, t=0):
    """Sum of the items of xs above t."""
    total = 0
    for x in xs:
        if x > t:
            total += x
    return total


{CLAMP}

def biggest_word(s, sep=" "):
    """The longest of the sep-separated words of s, upper-cased, and the first two sorted."""
    words = [w for w in s.split(sep) if w]
    best = words[0]
    for w in words[1:]:
        if len(w) > len(best):
            best = w
    return best.upper(), sorted(words)[:2], max(len(w) for w in words)


{DOUBLE_BUMP_COMBO.replace("return first + second", "return first - second")}

def gap(a, b):
    """a - b."""
    return a - b


def gaps(xs):
    """The differences between neighbours of xs."""
    return [gap(xs[i + 1], xs[i]) for i in range(len(xs) - 1)]
'''

CALLS = [
    "total_above([3, 8, 1, 9], 2)",
    "total_above([4, 0, 5])",
    "clamp(-3, 0, 10)",
    "clamp(15, 0, 10)",
    "clamp(4, 0, 10)",
    "clamp(10, 0, 10)",
    "clamp(0, 0, 10)",
    "biggest_word('ab cde f')",
    "biggest_word('xy-z', '-')",
    "biggest_word('aa bb cc')",
    "double(4)",
    "bump(4)",
    "combo(5)",
    "gap(7, 2)",
    "gaps([1, 4, 9])",
]


def _results(source: str) -> dict[str, object]:
    try:
        ns = load_source(source)
    except Exception as exc:  # noqa: BLE001 - a mutant that does not import fails every call
        return {c: ("import", type(exc).__name__) for c in CALLS}
    out = {}
    for c in CALLS:
        try:
            out[c] = eval(c, dict(ns))
        except Exception as exc:  # noqa: BLE001
            out[c] = ("raises", type(exc).__name__)
    return out


def test_every_kind_has_a_mutation_that_fails_a_test():
    want = _results(SRC)
    muts = mutations(SRC)
    assert {m.kind for m in muts} == set(KINDS)
    for kind in KINDS:
        caught = [m for m in muts if m.kind == kind and _results(m.mutated) != want]
        assert caught, kind
    for m in muts:
        ast.parse(m.mutated)
        assert m.mutated != SRC and "while" not in m.mutated
        before, after = SRC.splitlines(), m.mutated.splitlines()
        # the lines outside the edited span are untouched (text-level edit)
        assert before[: m.line - 1] == after[: m.line - 1], m
        tail = len(before) - m.end_line
        assert tail == 0 or before[-tail:] == after[-tail:], m


def test_examples_of_each_kind():
    by_detail = {(m.kind, m.function, m.detail) for m in mutations(SRC)}
    assert ("comparison_boundary", "clamp", "`<` -> `<=`") in by_detail
    assert ("operator_swap", "total_above", "`+=` -> `-=`") in by_detail
    assert ("wrong_default", "total_above", "`0` -> `1`") in by_detail
    assert ("wrong_default", "biggest_word", '`" "` -> `"_"`') in by_detail  # quotes kept
    assert ("wrong_init", "total_above", "`0` -> `1`") in by_detail
    assert ("wrong_builtin", "biggest_word", "`max` -> `min`") in by_detail
    assert ("wrong_builtin", "biggest_word", "`.upper` -> `.lower`") in by_detail
    assert ("wrong_builtin", "biggest_word", "`reverse=True` added") in by_detail
    assert ("wrong_slice", "biggest_word", "`2` -> `3`") in by_detail
    assert ("wrong_variable", "clamp", "`hi` -> `lo`") in by_detail
    assert ("swapped_arguments", "gaps", "arguments `xs[i + 1]` and `xs[i]` swapped") in by_detail
    assert ("dropped_condition", "biggest_word", "filter `w` dropped") in by_detail


def test_missing_case_removes_a_whole_multi_line_block():
    cases = [m for m in mutations(SRC) if m.kind == "missing_case"]
    assert "case `if x < lo:` removed" in {m.detail for m in cases}
    m = next(m for m in cases if m.function == "clamp" and "x < lo" in m.detail)
    assert m.end_line == m.line + 1  # the `if` line and its body
    assert SRC.splitlines()[m.line - 1 : m.end_line] == ["    if x < lo:", "        return lo"]
    assert len(m.mutated.splitlines()) == len(SRC.splitlines()) - 2
    ns = load_source(m.mutated)
    assert ns["clamp"](-3, 0, 10) == -3 and ns["clamp"](15, 0, 10) == 10  # only that case lost


def test_cross_function_calls_another_function_of_the_module():
    cross = {(m.function, m.detail): m for m in mutations(SRC) if m.kind == "cross_function"}
    assert {
        ("combo", "calls `bump` instead of `double`"),
        ("combo", "calls `double` instead of `bump`"),
        ("gaps", "calls `total_above` instead of `gap`"),
    } <= set(cross)
    # only same-arity functions, never the caller itself (no recursion)
    assert not [k for k in cross if f"calls `{k[0]}`" in k[1] or "`clamp`" in k[1]]
    m = cross[("combo", "calls `bump` instead of `double`")]
    before, after = _results(SRC), _results(m.mutated)
    # the callees' own tests still pass: only the caller's tests see the bug
    assert [c for c in CALLS if before[c] != after[c]] == ["combo(5)"]


def test_no_mutation_can_loop_or_allocate_without_bound():
    src = """def spread(xs, n):
    out = []
    for x in xs:
        out.append(x)
    for i in range(n):
        out.append(i)
    return [y for y in out if y] + ["-"] * n
"""
    for m in mutations(src):
        if m.kind != "wrong_variable":
            continue
        tree = ast.parse(m.mutated)
        loops = [n.iter for n in ast.walk(tree) if isinstance(n, ast.For | ast.comprehension)]
        assert [ast.unparse(i) for i in loops] == ["xs", "range(n)", "out"], m.detail
        assert '["-"] * n' in m.mutated


def test_mutations_are_deterministic():
    first = mutations(SRC)
    again = mutations.__wrapped__(SRC)  # uncached
    assert first == again and len(first) > 50


def test_a_source_that_does_not_parse_is_an_error():
    with pytest.raises(SyntaxError):
        mutations("def broken(:\n")
