"""Synthetic bugs in the SWE-smith manner: one small AST mutation in a function the tests use.

Kinds (each edits only the source segment of one node, so the rest of the file, comments and
formatting included, is untouched and the fix patch is a one- or two-line diff):

    operator_swap      + <-> -, * <-> //, < <-> <=, > <-> >=, == <-> !=, and <-> or, in <-> not in
    off_by_one         an integer literal n in a comparison, subscript, range() or +/- -> n + 1
    dropped_condition  the test of an `if` / `elif` / `while` guard replaced by True
    wrong_return       `return <expr>` -> `return None` (True <-> False for boolean literals)

"Covered by tests" is approximated by name: a function (or method) is a target when its name
occurs in some test file's text. Whether a mutant really breaks a test is decided afterwards by
running the tests (swe_validate); mutants that break nothing are dropped there.
Simplification: no coverage tracing, one mutation per bug, no combination of bugs.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult}
_CMP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BOOL = {ast.And: ast.Or, ast.Or: ast.And}
KINDS = ("operator_swap", "off_by_one", "dropped_condition", "wrong_return")


@dataclass(frozen=True)
class Mutation:
    """One applicable mutation: where (1-based lines, 0-based columns) and what replaces it."""

    kind: str
    path: str
    function: str
    lineno: int
    col: int
    end_lineno: int
    end_col: int
    replacement: str
    original: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.path}:{self.function}:{self.lineno}:{self.col}"


def _segment(lines: list[str], node: ast.AST) -> str:
    return ast.get_source_segment("".join(lines), node) or ""


def _mutants_of(node: ast.AST) -> list[tuple[str, ast.AST, str]]:
    """(kind, node to replace, replacement source) for one AST node."""
    out: list[tuple[str, ast.AST, str]] = []
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        new = ast.BinOp(node.left, _BIN[type(node.op)](), node.right)
        out.append(("operator_swap", node, ast.unparse(new)))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
        new = ast.Compare(node.left, [_CMP[type(node.ops[0])]()], node.comparators)
        out.append(("operator_swap", node, ast.unparse(new)))
    elif isinstance(node, ast.BoolOp):
        out.append(
            ("operator_swap", node, ast.unparse(ast.BoolOp(_BOOL[type(node.op)](), node.values)))
        )
    elif isinstance(node, ast.If | ast.While) and not isinstance(node.test, ast.Constant):
        out.append(("dropped_condition", node.test, "True"))
    elif isinstance(node, ast.Return) and node.value is not None:
        v = node.value
        if isinstance(v, ast.Constant) and isinstance(v.value, bool):
            out.append(("wrong_return", v, repr(not v.value)))
        elif not (isinstance(v, ast.Constant) and v.value is None):
            out.append(("wrong_return", v, "None"))
    return out


def _off_by_one(fn: ast.AST) -> list[tuple[str, ast.AST, str]]:
    out = []
    for node in ast.walk(fn):
        parents: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            parents = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript):
            sl = node.slice
            parents = [sl.lower, sl.upper] if isinstance(sl, ast.Slice) else [sl]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "range":
            parents = list(node.args)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            parents = [node.right]
        for c in parents:
            if isinstance(c, ast.Constant) and type(c.value) is int:
                out.append(("off_by_one", c, str(c.value + 1)))
    return out


def find_mutations(source: str, path: str, targets: set[str] | None = None) -> list[Mutation]:
    """Every mutation of the functions in `source` (those named in `targets`, if given)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    out: list[Mutation] = []
    seen: set[tuple[int, int, str]] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if targets is not None and fn.name not in targets:
            continue
        cands = [m for node in ast.walk(fn) for m in _mutants_of(node)] + _off_by_one(fn)
        for kind, node, repl in cands:
            pos = (node.lineno, node.col_offset, kind)
            original = _segment(lines, node)
            if pos in seen or not original or original == repl:
                continue
            seen.add(pos)
            out.append(
                Mutation(
                    kind,
                    path,
                    fn.name,
                    node.lineno,
                    node.col_offset,
                    node.end_lineno or node.lineno,
                    node.end_col_offset or 0,
                    repl,
                    original,
                )
            )
    return out


def apply_mutation(source: str, m: Mutation) -> str:
    """`source` with the mutation's segment replaced; checked to still parse."""
    lines = source.splitlines(keepends=True)
    a = sum(len(x.encode()) for x in lines[: m.lineno - 1])
    b = sum(len(x.encode()) for x in lines[: m.end_lineno - 1])
    raw = source.encode()
    start = a + len(lines[m.lineno - 1].encode()[: m.col])
    end = b + len(lines[m.end_lineno - 1].encode()[: m.end_col])
    out = (raw[:start] + m.replacement.encode() + raw[end:]).decode()
    ast.parse(out)  # a mutation must keep the module importable
    return out


def pick_mutations(muts: list[Mutation], n: int, seed: int = 0) -> list[Mutation]:
    """Up to n mutations, round-robin over kinds so every kind is represented, deterministic."""
    rng = random.Random(seed)
    by_kind = {k: [m for m in muts if m.kind == k] for k in KINDS}
    for v in by_kind.values():
        rng.shuffle(v)
    out: list[Mutation] = []
    while len(out) < n and any(by_kind.values()):
        for k in KINDS:
            if by_kind[k] and len(out) < n:
                out.append(by_kind[k].pop())
    return out
