"""Hidden tests of an injected bug, SWE-bench style: fresh calls, their verdicts, test files.

A SWE-bench instance's base commit lacks the tests that fail on the bug; its `test_patch` adds
new FAIL_TO_PASS tests that grading runs. The world's bugs follow that shape: the agent's repo
keeps only the visible tests that pass under the bug (`drop_tests`), and the graded test file
adds test functions over fresh inputs (`fresh_calls`: the repo's probe calls, or perturbed
visible calls) whose expected values come from running the correct code (`add_tests`).

A verdict (`passes`) is what pytest's `assert call == expected` decides: equality, not equal
reprs (`2 == 2.0` passes), so a hidden FAIL_TO_PASS test really fails under the bug.
"""

from __future__ import annotations

import ast
import copy
import random
from typing import Any

from arcforge.world.code.codelib import call_repr

_LETTERS = "abcdeiloprstu"


def passes(namespace: dict | None, call: str, expected: str) -> bool:
    """Whether `assert <call> == <expected>` holds in `namespace` (None: the module failed to
    import, so every test of it fails)."""
    if namespace is None:
        return False
    try:
        got = eval(call, copy.copy(namespace))  # noqa: S307 - our own generated source
        return bool(got == ast.literal_eval(expected))
    except Exception:  # noqa: BLE001 - a mutant may raise anything
        return False


def expected_value(namespace: dict, call: str) -> str | None:
    """repr of the correct result when it can be written in a test (a literal), else None."""
    out = call_repr(namespace, call)
    if out.startswith("raises "):
        return None
    try:
        ast.literal_eval(out)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return out


def _split_call(call: str) -> tuple[str, list[Any], list[tuple[str, Any]]] | None:
    try:
        node = ast.parse(call, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return None
        args = [ast.literal_eval(a) for a in node.args]
        kws = [(k.arg, ast.literal_eval(k.value)) for k in node.keywords if k.arg]
    except (ValueError, SyntaxError, TypeError):
        return None
    return node.func.id, args, kws


def _render(name: str, args: list[Any], kws: list[tuple[str, Any]]) -> str:
    return f"{name}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kws)])})"


def _nudge(rng: random.Random, v: Any) -> Any:
    """A nearby value of the same type (small: a perturbed call stays cheap to run)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        out = v + rng.choice([-2, -1, 1, 2, 3])
        return max(0, out) if v >= 0 else out
    if isinstance(v, str):
        pool = "".join(sorted(set(v) | set(_LETTERS)))
        i = rng.randrange(len(v) + 1)
        op = rng.randrange(3) if v else 1
        if op == 0:
            return v[:i] + rng.choice(pool) + v[i + 1 :]
        if op == 1:
            return v[:i] + rng.choice(pool) + v[i:]
        return v[:i] + v[i + 1 :] if len(v) > 1 else v + rng.choice(pool)
    if isinstance(v, list | tuple):
        items = list(v)
        if items and rng.random() < 0.6:
            i = rng.randrange(len(items))
            items[i] = _nudge(rng, items[i])
        elif items and rng.random() < 0.5 and len(items) > 1:
            items.pop(rng.randrange(len(items)))
        elif items:
            items.insert(rng.randrange(len(items) + 1), _nudge(rng, rng.choice(items)))
        return type(v)(items)
    if isinstance(v, dict) and v:
        out = dict(v)
        key = rng.choice(sorted(out, key=repr))
        out[key] = _nudge(rng, out[key])
        return out
    return v


def perturb(rng: random.Random, call: str) -> str | None:
    """`call` with one literal argument nudged (None: not a call of literals)."""
    parts = _split_call(call)
    if parts is None:
        return None
    name, args, kws = parts
    slots = [("a", i) for i in range(len(args))] + [("k", i) for i in range(len(kws))]
    if not slots:
        return None
    where, i = rng.choice(slots)
    if where == "a":
        args[i] = _nudge(rng, args[i])
    else:
        kws[i] = (kws[i][0], _nudge(rng, kws[i][1]))
    return _render(name, args, kws)


def fresh_calls(
    rng: random.Random, probes: list[str], visible: list[str], n: int = 10
) -> list[str]:
    """Up to `n` distinct calls that no visible test makes: the repo's probe calls for the
    function when it has them, else perturbed visible calls (one or two nudges each)."""
    seen = set(visible)
    out = [c for c in dict.fromkeys(probes) if c not in seen][:n]
    if probes or not visible:
        return out
    for _ in range(8 * n):
        if len(out) >= n:
            break
        call: str | None = rng.choice(visible)
        for _ in range(rng.randint(1, 2)):
            call = perturb(rng, call) if call else None
        if call and call not in seen:
            seen.add(call)
            out.append(call)
    return out


def drop_tests(text: str, names: set[str]) -> str:
    """The test file without the top-level test functions named in `names` (and the blank
    lines that led into them)."""
    if not names:
        return text
    lines = text.splitlines(keepends=True)
    cut: set[int] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            start = node.lineno - 1
            while start > 0 and not lines[start - 1].strip():
                start -= 1  # the host's own loop over a file it wrote, never a mutant's
            cut.update(range(start, node.end_lineno or node.lineno))
    return "".join(ln for i, ln in enumerate(lines) if i not in cut)


def add_tests(text: str, import_from: str, tests: list[tuple[str, str, str]]) -> str:
    """The test file with `tests` ([(name, call, expected)]) appended; the functions they call
    are added to its import when it lacks them."""
    called = sorted({c.split("(", 1)[0] for _, c, _ in tests})
    lines = text.splitlines(keepends=True)
    head = f"from {import_from} import "
    i = next((k for k, ln in enumerate(lines) if ln.startswith(head)), None)
    if i is None:
        lines.insert(0, head + ", ".join(called) + "\n")
    else:
        have = [n.strip() for n in lines[i][len(head) :].split(",")]
        lines[i] = head + ", ".join(sorted(set(have) | set(called))) + "\n"
    body = "".join(lines).rstrip("\n") + "\n"
    for name, call, expected in tests:
        body += f"\n\ndef {name}():\n    assert {call} == {expected}\n"
    return body
