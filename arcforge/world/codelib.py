"""A small library of Python function templates: the raw material of repos, code tasks and
code snippets.

Each template is plain source with a `{f}` placeholder for the function name plus an argument
generator. Expected outputs are never written by hand: they are computed by executing the
correct source (`call_repr`), so tests, examples and issue texts cannot disagree with the code.
Templates avoid `while` loops so that an injected bug can never hang the in-process checker.
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType


def _ints(rng: random.Random, lo: int = 0, hi: int = 20, n: tuple[int, int] = (2, 6)) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(*n))]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdeiloprstu") for _ in range(rng.randint(3, 7)))


def _stock(rng: random.Random) -> dict[str, int]:
    return {_word(rng): rng.randint(0, 30) for _ in range(rng.randint(2, 5))}


@dataclass(frozen=True)
class FuncTemplate:
    key: str
    theme: str
    names: tuple[str, ...]
    params: str
    source: str  # with {f}
    gen: Callable[[random.Random], tuple]

    def render(self, name: str) -> str:
        return self.source.replace("{f}", name).strip() + "\n"

    def docstring(self) -> str:
        return self.source.split('"""')[1].strip()

    def stub(self, name: str) -> str:
        """The signature and docstring lines: what a HumanEval-style prompt shows."""
        return "".join(self.render(name).splitlines(keepends=True)[:2])

    def body(self, name: str) -> str:
        """The rest of the function after `stub`: HumanEval's canonical solution."""
        return self.render(name)[len(self.stub(name)) :]


T = FuncTemplate
TEMPLATES: list[FuncTemplate] = [
    T("count_vowels", "text", ("count_vowels", "vowel_count"), "s", '''
def {f}(s):
    """Return how many characters of s are vowels (a, e, i, o, u, either case)."""
    total = 0
    for ch in s.lower():
        if ch in "aeiou":
            total = total + 1
    return total
''', lambda r: (_word(r) + " " + _word(r).upper(),)),
    T("is_palindrome", "text", ("is_palindrome", "reads_same_backwards"), "s", '''
def {f}(s):
    """Return True if s reads the same forwards and backwards, ignoring case and spaces."""
    cleaned = s.replace(" ", "").lower()
    return cleaned == cleaned[::-1]
''', lambda r: (r.choice([_word(r), "Ab ba", "level", "no lemon no melon", _word(r)]),)),
    T("capitalize_words", "text", ("capitalize_words", "title_words"), "s", '''
def {f}(s):
    """Return s with the first letter of every space-separated word in upper case."""
    words = s.split(" ")
    return " ".join(w[:1].upper() + w[1:] for w in words)
''', lambda r: (f"{_word(r)} {_word(r)} {_word(r)}",)),
    T("truncate", "text", ("truncate", "shorten"), "s, n", '''
def {f}(s, n):
    """Return s unchanged if it has at most n characters, else its first n characters + '...'."""
    if len(s) <= n:
        return s
    return s[:n] + "..."
''', lambda r: (_word(r) + _word(r), r.randint(2, 9))),
    T("initials", "text", ("initials", "name_initials"), "name", '''
def {f}(name):
    """Return the upper-case initials of the words in name, joined by dots, e.g. 'A.B.'."""
    parts = [p for p in name.split() if p]
    return "".join(p[0].upper() + "." for p in parts)
''', lambda r: (" ".join(_word(r) for _ in range(r.randint(1, 3))),)),
    T("mean", "stats", ("mean", "average"), "xs", '''
def {f}(xs):
    """Return the arithmetic mean of the non-empty list xs."""
    total = 0
    for x in xs:
        total = total + x
    return total / len(xs)
''', lambda r: (_ints(r),)),
    T("value_range", "stats", ("value_range", "spread"), "xs", '''
def {f}(xs):
    """Return max(xs) - min(xs) for a non-empty list, computed in one pass."""
    lo = xs[0]
    hi = xs[0]
    for x in xs[1:]:
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    return hi - lo
''', lambda r: (_ints(r, n=(3, 7)),)),
    T("clamp", "stats", ("clamp", "bound"), "x, lo, hi", '''
def {f}(x, lo, hi):
    """Return x limited to the closed interval [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
''', lambda r: (r.randint(-5, 25), 0, r.randint(5, 20))),
    T("count_above", "stats", ("count_above", "num_greater"), "xs, t", '''
def {f}(xs, t):
    """Return how many values in xs are strictly greater than t."""
    n = 0
    for x in xs:
        if x > t:
            n = n + 1
    return n
''', lambda r: (_ints(r, n=(4, 8)), r.randint(3, 15))),
    T("running_total", "stats", ("running_total", "cumulative_sums"), "xs", '''
def {f}(xs):
    """Return the list of running sums of xs: [x0, x0 + x1, ...]."""
    out = []
    acc = 0
    for x in xs:
        acc = acc + x
        out.append(acc)
    return out
''', lambda r: (_ints(r),)),
    T("total_items", "inventory", ("total_items", "stock_count"), "stock", '''
def {f}(stock):
    """Return the total number of units in the stock dict {item: count}."""
    total = 0
    for count in stock.values():
        total = total + count
    return total
''', lambda r: (_stock(r),)),
    T("low_stock", "inventory", ("low_stock", "needs_reorder"), "stock, threshold", '''
def {f}(stock, threshold):
    """Return the sorted names of items whose count is below threshold."""
    return sorted(item for item, count in stock.items() if count < threshold)
''', lambda r: (_stock(r), r.randint(5, 20))),
    T("restock", "inventory", ("restock", "add_units"), "stock, item, n", '''
def {f}(stock, item, n):
    """Return a new stock dict with n more units of item (added if missing)."""
    new = dict(stock)
    new[item] = new.get(item, 0) + n
    return new
''', lambda r: (_stock(r), _word(r), r.randint(1, 9))),
    T("remove_units", "inventory", ("remove_units", "take_units"), "stock, item, n", '''
def {f}(stock, item, n):
    """Return a new stock dict with n units of item removed, never going below 0."""
    new = dict(stock)
    left = new.get(item, 0) - n
    if left < 0:
        left = 0
    new[item] = left
    return new
''', lambda r: (s := _stock(r), r.choice(sorted(s)), r.randint(1, 35))),
    T("most_stocked", "inventory", ("most_stocked", "largest_item"), "stock", '''
def {f}(stock):
    """Return the item with the highest count (the alphabetically first one on ties)."""
    best = None
    for item in sorted(stock):
        if best is None or stock[item] > stock[best]:
            best = item
    return best
''', lambda r: (_stock(r),)),
    T("chunk", "listops", ("chunk", "batches"), "xs, n", '''
def {f}(xs, n):
    """Split xs into consecutive lists of length n (the last one may be shorter)."""
    return [xs[i : i + n] for i in range(0, len(xs), n)]
''', lambda r: (_ints(r, n=(3, 9)), r.randint(2, 4))),
    T("dedupe", "listops", ("dedupe", "unique_in_order"), "xs", '''
def {f}(xs):
    """Return xs without repeated values, keeping the first occurrence of each."""
    seen = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
''', lambda r: (_ints(r, 0, 5, (4, 9)),)),
    T("last_n", "listops", ("last_n", "tail"), "xs, n", '''
def {f}(xs, n):
    """Return the last n elements of xs (all of them if n >= len(xs))."""
    if n >= len(xs):
        return list(xs)
    return xs[len(xs) - n :]
''', lambda r: (_ints(r, n=(3, 8)), r.randint(1, 6))),
    T("index_of_max", "listops", ("index_of_max", "argmax"), "xs", '''
def {f}(xs):
    """Return the index of the first largest value in the non-empty list xs."""
    best = 0
    for i in range(1, len(xs)):
        if xs[i] > xs[best]:
            best = i
    return best
''', lambda r: (_ints(r, n=(3, 8)),)),
    T("pairwise_sums", "listops", ("pairwise_sums", "adjacent_sums"), "xs", '''
def {f}(xs):
    """Return the sums of adjacent pairs: [xs[0] + xs[1], xs[1] + xs[2], ...]."""
    return [xs[i] + xs[i + 1] for i in range(len(xs) - 1)]
''', lambda r: (_ints(r, n=(3, 7)),)),
    T("digit_sum", "numbers", ("digit_sum", "sum_of_digits"), "n", '''
def {f}(n):
    """Return the sum of the decimal digits of the non-negative integer n."""
    total = 0
    for ch in str(n):
        total = total + int(ch)
    return total
''', lambda r: (r.randint(10, 99999),)),
    T("factorial", "numbers", ("factorial", "fact"), "n", '''
def {f}(n):
    """Return n! for a non-negative integer n."""
    result = 1
    for k in range(2, n + 1):
        result = result * k
    return result
''', lambda r: (r.randint(2, 9),)),
    T("is_prime", "numbers", ("is_prime", "prime_check"), "n", '''
def {f}(n):
    """Return True if the integer n is a prime number."""
    if n < 2:
        return False
    for d in range(2, n):
        if n % d == 0:
            return False
    return True
''', lambda r: (r.randint(0, 60),)),
    T("gcd", "numbers", ("gcd", "greatest_divisor"), "a, b", '''
def {f}(a, b):
    """Return the greatest common divisor of two positive integers."""
    if b == 0:
        return a
    return {f}(b, a % b)
''', lambda r: (r.randint(2, 12) * (k := r.randint(1, 9)), r.randint(2, 12) * k)),
    T("count_multiples", "numbers", ("count_multiples", "multiples_upto"), "n, k", '''
def {f}(n, k):
    """Return how many of 1..n (inclusive) are divisible by k."""
    count = 0
    for i in range(1, n + 1):
        if i % k == 0:
            count = count + 1
    return count
''', lambda r: (r.randint(5, 60), r.randint(2, 7))),
]  # fmt: skip
BY_KEY = {t.key: t for t in TEMPLATES}
THEMES = sorted({t.theme for t in TEMPLATES})


def call_src(name: str, args: tuple) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


def call_repr(namespace: dict, expr: str) -> str:
    """Evaluate `expr` in a copy of `namespace`; return repr(result) or 'raises <Error>: msg'."""
    try:
        return repr(eval(expr, copy.copy(namespace)))  # noqa: S307 - our own generated source
    except Exception as exc:  # noqa: BLE001 - any failure of generated code is a result
        return f"raises {type(exc).__name__}: {exc}"


@functools.lru_cache(maxsize=4096)
def _compiled(source: str) -> CodeType:
    return compile(source, "<world>", "exec")


def load_source(source: str) -> dict:
    """Execute module source and return its namespace (our own generated code only)."""
    ns: dict = {"__name__": "arcforge_world_exec"}
    exec(_compiled(source), ns)  # noqa: S102 - our own generated source
    return ns


def snippet_doc(rng: random.Random, tpl: FuncTemplate, name: str, n_examples: int) -> str:
    """A standalone code document: the function plus REPL-style examples with real outputs."""
    src = tpl.render(name)
    ns = load_source(src)
    lines = [f"# {tpl.theme} helper: {name}", src]
    for _ in range(n_examples):
        expr = call_src(name, tpl.gen(rng))
        lines.append(f">>> {expr}\n{call_repr(ns, expr)}")
    return "\n".join(lines) + "\n"
