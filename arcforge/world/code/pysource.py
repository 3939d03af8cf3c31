"""Python source as the world's SWE tasks see it: the tool names they offer, and the
definitions (functions and methods) a module holds, found with Python's own `ast`.

The SWE tools (`arcforge.envs.swe_tools`), the template demos and the expert scripts all locate
a function by name and line through these helpers; they live here so that the world, which
builds tasks and demonstrations, needs nothing from the environments.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# the tools every SWE episode offers (SWEEnv), in the order its prompt lists them
SWE_TOOLS = (
    "localize",
    "view_function",
    "replace_function",
    "view_file",
    "search_code",
    "edit_file",
    "run_tests",
    "bash",
)
# the world's SWE tasks offer these (SWEEnv's `offered_tools`): the path-based tools left out
WORLD_SWE_TOOLS = ("localize", "view_function", "replace_function", "run_tests")


@dataclass(frozen=True)
class Definition:
    path: str
    name: str  # "fn" or "Class.fn"
    start: int  # 1-based first line, decorators included
    end: int  # 1-based last line
    body: int = 0  # first line after the signature and docstring (end + 1: only a docstring)


def definitions(source: str, path: str) -> list[Definition]:
    """Top-level functions and methods of top-level classes defined in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []

    def add(node: ast.AST, name: str) -> None:
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end, first = node.end_lineno or node.lineno, node.body[0]
        doc = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        body = (first.end_lineno or first.lineno) + 1 if doc else first.lineno
        out.append(Definition(path, name, start, end, body))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            add(node, node.name)
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    add(sub, f"{node.name}.{sub.name}")
    return out


def show_definition(d: Definition, source: str) -> str:
    """view_function's view of one definition: "path:start-end", then its numbered lines."""
    lines = source.splitlines()[d.start - 1 : d.end]
    body = "\n".join(f"{d.start + i:4d} {ln}" for i, ln in enumerate(lines))
    return f"{d.path}:{d.start}-{d.end}\n{body}"


def matches_name(d: Definition, name: str) -> bool:
    return d.name == name or d.name.rsplit(".", 1)[-1] == name


def definition_at(source: str, path: str, name: str, line: int) -> Definition:
    """The definition of `name` in `source` that spans `line` (1-based), e.g. a bug's function.

    Raises:
        ValueError: when no such definition spans that line.
    """
    for d in definitions(source, path):
        if matches_name(d, name) and d.start <= line <= d.end:
            return d
    raise ValueError(f"{path}: no definition of {name!r} spans line {line}")
