"""Bug mutations of Python module source: AST-located, text-level edits (SWE-smith style).

`mutations(source)` lists every candidate bug of the module's top-level functions, each a whole
mutated source, grouped by kind (`KINDS`): operator and comparison-boundary swaps, off-by-one
constants, wrong returns, dropped conditions, a missing `if` case (a whole multi-line block
removed), swapped call arguments, changed parameter defaults, wrong accumulator initial values,
swapped builtins and methods (min/max, sum/len, a sort's reverse flag, upper/lower ...), one
local used in place of another, shifted slice bounds or indexes, and a call to another function
of the same module (cross-function). The AST finds each site; the edit replaces that site's
exact text span, so the rest of the file (comments, layout) is byte for byte the original.

Whether a candidate is a bug at all (some tests fail under it) is the caller's check
(`Repo.inject_bug`). Candidates never create a `while` loop, never create a `*` or `**`, and
never change what a `for` loop or a comprehension iterates over, a `range` argument or an
operand of `*`, to another variable: a mutant cannot loop forever or allocate without bound,
so mutants are run in-process without a time limit.
"""

from __future__ import annotations

import ast
import bisect
import functools
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = (
    "operator_swap",
    "comparison_boundary",
    "off_by_one",
    "wrong_return",
    "dropped_condition",
    "missing_case",
    "swapped_arguments",
    "wrong_default",
    "wrong_init",
    "wrong_builtin",
    "wrong_variable",
    "wrong_slice",
    "cross_function",
)

# the source symbol of each operator node type the operator mutations rewrite
_OP_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.GtE: ">=",
}


def _by_node_type(swaps: dict[str, str]) -> dict[type, tuple[str, str]]:
    """Operator node type -> (its symbol, the symbol that replaces it), from symbol swaps."""
    return {op: (sym, swaps[sym]) for op, sym in _OP_SYMBOL.items() if sym in swaps}


_BINOP = _by_node_type({"+": "-", "-": "+", "*": "+", "/": "//", "//": "%", "%": "//"})
_CMP_SWAP = _by_node_type({"==": "!=", "!=": "==", "<": ">", ">": "<", "<=": ">=", ">=": "<="})
_BOUNDARY = _by_node_type({"<": "<=", "<=": "<", ">": ">=", ">=": ">"})
_BUILTINS = {"min": "max", "max": "min", "sum": "len", "any": "all", "all": "any"}
_METHODS = {
    "upper": "lower",
    "lower": "upper",
    "startswith": "endswith",
    "endswith": "startswith",
    "lstrip": "rstrip",
    "rstrip": "lstrip",
    "strip": "lstrip",
    "find": "rfind",
    "rfind": "find",
    "keys": "values",
    "values": "keys",
    "isdigit": "isalpha",
    "isalpha": "isdigit",
    "isupper": "islower",
    "islower": "isupper",
    "title": "capitalize",
    "capitalize": "title",
    "pop": "copy",
}
_CHAR_SWAP = {",": ";", ";": ",", " ": "_", "_": "-", "-": "_", ":": "=", "=": ":"}
_UNBOUNDED = {"range", "ljust", "rjust", "center", "zfill", "repeat"}  # args never a variable


@dataclass(frozen=True)
class Mutation:
    """One candidate bug: the whole module with the edit applied.

    kind: one of KINDS. function: the top-level function whose text changes. line / end_line:
    1-based lines of the original that the edit touches (end_line > line: a multi-line edit).
    mutated: the module source with the bug. detail: what changed, e.g. "`<` -> `<=`".
    """

    kind: str
    function: str
    line: int
    end_line: int
    mutated: str
    detail: str


class _Source:
    """Byte-offset edits on a source (the AST's col_offset counts UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self.starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.starts.append(i + 1)

    def off(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        n: ast.expr = node  # type: ignore[assignment]
        return self.off(n.lineno, n.col_offset), self.off(
            n.end_lineno or n.lineno, n.end_col_offset or 0
        )

    def text(self, a: int, b: int) -> str:
        return self.data[a:b].decode()

    def seg(self, node: ast.AST) -> str:
        return self.text(*self.span(node))

    def edit(self, edits: list[tuple[int, int, str]]) -> str:
        """The source with each (start, end, new) byte span replaced (spans do not overlap)."""
        out = self.data
        for a, b, new in sorted(edits, reverse=True):
            out = out[:a] + new.encode() + out[b:]
        return out.decode()

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def _params(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


def _arity(fn: ast.FunctionDef) -> tuple[int, int, set[str]]:
    """(required positional, max positional, keyword names) of a plain function."""
    pos = [*fn.args.posonlyargs, *fn.args.args]
    return (
        len(pos) - len(fn.args.defaults),
        len(pos),
        {p.arg for p in [*fn.args.args, *fn.args.kwonlyargs]},
    )


def _parents(fn: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}


def _guarded(fn: ast.FunctionDef) -> set[ast.AST]:
    """Nodes a variable swap must not touch: what loops iterate over, size-like arguments,
    operands of `*` (another variable there could mean a huge loop or allocation)."""
    out: set[ast.AST] = set()
    for node in ast.walk(fn):
        roots: list[ast.AST] = []
        if isinstance(node, ast.For | ast.comprehension):
            roots.append(node.iter)
        elif isinstance(node, ast.Call):
            name = (
                node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            )
            if name in _UNBOUNDED:
                roots += [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Pow | ast.LShift):
            roots += [node.left, node.right]
        for r in roots:
            out.update(ast.walk(r))
    return out


def _comprehension_names(fn: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.comprehension):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return names


def _bound_lines(fn: ast.FunctionDef) -> dict[str, int]:
    """Local name -> the first line that binds it (parameters: the def line); names bound only
    inside comprehensions are not locals of the function."""
    first = {p: fn.lineno for p in _params(fn)}
    inner = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.comprehension):
            inner |= {id(n) for n in ast.walk(node.target)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and id(node) not in inner:
            first[node.id] = min(first.get(node.id, node.lineno), node.lineno)
    return first


def _calls_graph(tree: ast.Module) -> dict[str, set[str]]:
    funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return {
        n.name: {
            c.func.id
            for c in ast.walk(n)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in funcs
        }
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
    }


def _reaches(graph: dict[str, set[str]], start: str, target: str) -> bool:
    seen, todo = set(), [start]
    for name in todo:  # a list grown while iterated: a breadth-first walk
        if name == target:
            return True
        if name not in seen:
            seen.add(name)
            todo += sorted(graph.get(name, ()))
    return False


class _Sites:
    """Collects (kind, start, end, new, detail) edits of one function."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.found: list[tuple[str, list[tuple[int, int, str]], str]] = []

    def add(self, kind: str, edits: list[tuple[int, int, str]], detail: str) -> None:
        if all(self.src.text(a, b) != new for a, b, new in edits):
            self.found.append((kind, edits, detail))

    def replace(self, kind: str, node: ast.AST, new: str, detail: str = "") -> None:
        a, b = self.src.span(node)
        self.add(kind, [(a, b, new)], detail or f"`{self.src.text(a, b)}` -> `{new}`")

    def operator(self, kind: str, left: ast.AST, right: ast.AST, old: str, new: str) -> None:
        """Replace the operator token between two operands (parentheses may sit around it)."""
        a, b = self.src.span(left)[1], self.src.span(right)[0]
        between = self.src.text(a, b)
        if between.strip(" ()\n") != old:
            return
        i = between.index(old)
        start = a + len(between[:i].encode())
        self.add(kind, [(start, start + len(old.encode()), new)], f"`{old}` -> `{new}`")


def _function_sites(fn: ast.FunctionDef, src: _Source, tree: ast.Module) -> Iterator[tuple]:
    sites = _Sites(src)
    parents = _parents(fn)
    guarded = _guarded(fn)
    params = _params(fn)
    defaults = {id(n) for d in [*fn.args.defaults, *fn.args.kw_defaults] if d for n in ast.walk(d)}
    in_slice = {id(n) for s in ast.walk(fn) if isinstance(s, ast.Slice) for n in ast.walk(s)}
    body = [n for n in ast.walk(fn) if id(n) not in defaults and n is not fn]
    for node in body:
        _operators(node, sites)
        _constants(node, sites, in_slice, parents)
        _conditions(node, sites, src)
        _builtins(node, sites, src)
        _slices(node, sites, src)
        if isinstance(node, ast.Return) and node.value is not None and params:
            seg = src.seg(node.value)
            sites.replace("wrong_return", node.value, params[0] if seg != params[0] else "None")
        if (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            a0, a1 = node.args[0], node.args[1]
            s0, s1 = src.seg(a0), src.seg(a1)
            if s0 != s1:
                sites.add(
                    "swapped_arguments",
                    [(*src.span(a0), s1), (*src.span(a1), s0)],
                    f"arguments `{s0}` and `{s1}` swapped",
                )
    _missing_cases(fn, sites, src)
    _defaults(fn, sites)
    _inits(fn, sites, src)
    _variables(fn, sites, guarded)
    _cross_calls(fn, sites, tree)
    yield from sites.found


def _operators(node: ast.AST, sites: _Sites) -> None:
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        sites.operator("operator_swap", node.left, node.right, *_BINOP[type(node.op)])
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BINOP:
        old, new = _BINOP[type(node.op)]
        sites.operator("operator_swap", node.target, node.value, old + "=", new + "=")
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, right = type(node.ops[0]), node.comparators[0]
        if op in _CMP_SWAP:
            sites.operator("operator_swap", node.left, right, *_CMP_SWAP[op])
        if op in _BOUNDARY:
            sites.operator("comparison_boundary", node.left, right, *_BOUNDARY[op])
        if op in (ast.In, ast.NotIn):
            old, new = ("in", "not in") if op is ast.In else ("not in", "in")
            sites.operator("operator_swap", node.left, right, old, new)
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        sites.operator("operator_swap", node.values[0], node.values[1], old, new)


def _constants(node: ast.AST, sites: _Sites, in_slice: set[int], parents: dict) -> None:
    if not (
        isinstance(node, ast.Constant) and type(node.value) is int and id(node) not in in_slice
    ):
        return
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) or (
        isinstance(parent, ast.Assign) and isinstance(parent.targets[0], ast.Name)
    ):
        return  # an index is wrong_slice's, an initial value wrong_init's
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub):
        return
    if 0 <= node.value <= 10:
        sites.replace("off_by_one", node, str(node.value + 1))
        if node.value >= 1:
            sites.replace("off_by_one", node, str(node.value - 1))


def _conditions(node: ast.AST, sites: _Sites, src: _Source) -> None:
    if isinstance(node, ast.BoolOp):
        first = src.seg(node.values[0])
        sites.replace("dropped_condition", node, first, f"`{src.seg(node)}` -> `{first}`")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        sites.replace("dropped_condition", node, src.seg(node.operand))
    elif isinstance(node, ast.comprehension) and node.ifs:
        prev = node.iter if len(node.ifs) == 1 else node.ifs[-2]
        a, b = src.span(prev)[1], src.span(node.ifs[-1])[1]
        sites.add("dropped_condition", [(a, b, "")], f"filter `{src.seg(node.ifs[-1])}` dropped")
    elif isinstance(node, ast.If) and not isinstance(node.test, ast.Constant):
        sites.replace("dropped_condition", node.test, "True")


def _missing_cases(fn: ast.FunctionDef, sites: _Sites, src: _Source) -> None:
    """A whole `if` block (no else) removed, where its statement list keeps another one."""
    for block in ast.walk(fn):
        for field in ("body", "orelse"):
            stmts = getattr(block, field, None)
            if not isinstance(stmts, list) or len(stmts) < 2 or block is fn and field == "orelse":
                continue
            for st in stmts:
                if not isinstance(st, ast.If) or st.orelse or st.end_lineno == st.lineno:
                    continue
                a = src.off(st.lineno, 0)
                end_line = st.end_lineno or st.lineno
                b = src.starts[end_line] if end_line < len(src.starts) else len(src.data)
                if src.text(a, src.off(st.lineno, st.col_offset)).strip():
                    continue  # something else starts that line
                test = src.seg(st.test)
                sites.add("missing_case", [(a, b, "")], f"case `if {test}:` removed")


def _builtins(node: ast.AST, sites: _Sites, src: _Source) -> None:
    if not isinstance(node, ast.Call):
        return
    f = node.func
    if isinstance(f, ast.Name) and f.id in _BUILTINS and node.args:
        sites.replace("wrong_builtin", f, _BUILTINS[f.id])
    elif isinstance(f, ast.Name) and f.id == "abs" and len(node.args) == 1:
        sites.replace("wrong_builtin", node, src.seg(node.args[0]))
    elif isinstance(f, ast.Name) and f.id in ("sorted", "reversed") and node.args:
        rev = [k for k in node.keywords if k.arg == "reverse"]
        if f.id == "reversed":
            sites.replace("wrong_builtin", node, src.seg(node.args[0]))
        elif rev and isinstance(rev[0].value, ast.Constant):
            sites.replace("wrong_builtin", rev[0].value, str(not rev[0].value.value))
        elif not rev:
            end = src.span(node)[1] - 1  # the closing parenthesis
            sites.add("wrong_builtin", [(end, end, ", reverse=True")], "`reverse=True` added")
    elif isinstance(f, ast.Attribute) and f.attr in _METHODS:
        if f.attr == "pop" and node.args:
            return
        b = src.span(f)[1]
        a = b - len(f.attr.encode())
        sites.add(
            "wrong_builtin", [(a, b, _METHODS[f.attr])], f"`.{f.attr}` -> `.{_METHODS[f.attr]}`"
        )


def _slices(node: ast.AST, sites: _Sites, src: _Source) -> None:
    if not isinstance(node, ast.Subscript):
        return
    s = node.slice
    if isinstance(s, ast.Slice):
        if s.lower is None and s.upper is not None:
            a = src.span(s)[0]
            sites.add("wrong_slice", [(a, a, "1")], "slice starts at 1")
        for bound in (s.lower, s.upper):
            if bound is None:
                continue
            if isinstance(bound, ast.Constant) and type(bound.value) is int:
                sites.replace("wrong_slice", bound, str(bound.value + 1))
            elif isinstance(bound, ast.UnaryOp) and isinstance(bound.operand, ast.Constant):
                sites.replace("wrong_slice", bound, str(-bound.operand.value - 1))  # type: ignore[operator]
            else:
                text = src.seg(bound)
                atom = isinstance(bound, ast.Name | ast.Attribute | ast.Call | ast.Subscript)
                sites.replace("wrong_slice", bound, f"{text} + 1" if atom else f"({text}) + 1")
        if s.step is not None and src.seg(s.step) == "-1" and s.lower is None and s.upper is None:
            sites.replace("wrong_slice", s.step, "1")
    elif isinstance(s, ast.Constant) and type(s.value) is int:
        sites.replace("wrong_slice", s, str(s.value + 1) if s.value >= 0 else str(s.value - 1))
    elif isinstance(s, ast.UnaryOp) and isinstance(s.operand, ast.Constant):
        sites.replace("wrong_slice", s, "0")


def _defaults(fn: ast.FunctionDef, sites: _Sites) -> None:
    for d in [*fn.args.defaults, *fn.args.kw_defaults]:
        if not isinstance(d, ast.Constant):
            continue
        v = d.value
        if isinstance(v, bool):
            new = repr(not v)
        elif isinstance(v, int | float):
            new = repr(v + 1)
        elif isinstance(v, str):
            new = repr(
                " " if v == "" else _CHAR_SWAP.get(v, v.upper() if v.upper() != v else v + v)
            )
            if sites.src.seg(d)[:1] == '"' and new[:1] == "'" and '"' not in new[1:-1]:
                new = f'"{new[1:-1]}"'  # the file's own quote style
        else:
            continue
        sites.replace("wrong_default", d, new)


def _inits(fn: ast.FunctionDef, sites: _Sites, src: _Source) -> None:
    """The first assignment of a name that is assigned again later (an accumulator)."""
    stores: dict[str, list[ast.AST]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            stores.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            stores.setdefault(node.targets[0].id, []).append(node)
    for group in stores.values():
        group = sorted(group, key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
        first = group[0]
        if len(group) < 2 or not isinstance(first, ast.Assign) or len(first.targets) != 1:
            continue
        v = first.value
        if isinstance(v, ast.Constant):
            val = v.value
            if isinstance(val, bool):
                new = repr(not val)
            elif isinstance(val, int | float):
                new = repr(type(val)(1 if val == 0 else 0))
            elif isinstance(val, str):
                new = repr(" " if val == "" else "")
            elif val is None:
                new = "0"
            else:
                continue
        elif isinstance(v, ast.Subscript):
            new = "0"
        elif isinstance(v, ast.List) and not v.elts:
            new = "[0]"
        else:
            continue
        sites.replace("wrong_init", v, new)


def _variables(fn: ast.FunctionDef, sites: _Sites, guarded: set[ast.AST]) -> None:
    """A use of one local replaced by another local already bound on an earlier line."""
    bound = _bound_lines(fn)
    comp = _comprehension_names(fn)
    calls = {id(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        if node.id not in bound or node in guarded or id(node) in calls:
            continue
        if node.id in comp and bound[node.id] != fn.lineno:
            continue  # a comprehension variable sharing a local's name
        for other in sorted(bound):
            if other != node.id and other not in comp and bound[other] < node.lineno:
                sites.replace("wrong_variable", node, other)


def _cross_calls(fn: ast.FunctionDef, sites: _Sites, tree: ast.Module) -> None:
    """A call of another module function replaced by a call of a third one that takes the same
    arguments (and never leads back to this function: no recursion)."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    graph = _calls_graph(tree)
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        g = node.func.id
        if g not in defs or g == fn.name or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        n_pos, kws = len(node.args), {k.arg for k in node.keywords}
        for h in sorted(defs):
            lo, hi, names = _arity(defs[h])
            if h in (g, fn.name) or not lo <= n_pos <= hi or not kws <= names:
                continue
            if _reaches(graph, h, fn.name):
                continue
            sites.replace("cross_function", node.func, h, f"calls `{h}` instead of `{g}`")


@functools.lru_cache(maxsize=256)
def mutations(source: str) -> tuple[Mutation, ...]:
    """Every candidate bug of `source`'s top-level functions, in file order (deterministic;
    cached: a repo's modules are mutated again for every bug drawn from them).

    Raises:
        SyntaxError: when `source` does not parse.
    """
    tree = ast.parse(source)
    src = _Source(source)
    out: list[Mutation] = []
    seen: set[str] = set()
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for kind, edits, detail in _function_sites(fn, src, tree):
            mutated = src.edit(edits)
            if mutated in seen or mutated == source:
                continue
            try:
                ast.parse(mutated)
            except SyntaxError:
                continue
            seen.add(mutated)
            a = min(e[0] for e in edits)
            b = max(e[1] for e in edits)
            line = src.line_of(a)
            end = src.line_of(max(a, b - 1))
            out.append(Mutation(kind, fn.name, line, end, mutated, detail))
    return tuple(out)
