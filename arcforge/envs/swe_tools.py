"""Function-level code tools for SWEEnv: view_function(name) and replace_function(name, code).

AutoCodeRover's agent navigates a repository by symbol (`search_method`, `search_class`,
`search_method_in_file`) rather than by path, and Agentless localizes to functions before it
edits. These two tools give SWEEnv that interface on top of the sandbox's files: the agent names
a function from the issue, sees its definition with its file and line numbers, and writes the
whole fixed definition back. Python's own `ast` finds definitions (top-level functions and
methods, `Class.method` for a method), so decorators, docstrings and nested blocks are handled
exactly; candidate files come from a `grep` in the sandbox, so a large repository is not parsed
whole. Test files and directories (`swe_env.is_protected`) are not searched: the grader resets
them anyway.

The demo's 4-layer model did not copy made-up paths from an issue into view_file / edit_file
(SWE 0 of 4 after SFT in sessions 20-23, every failure a path read from training); a function
named in the issue is a name it has seen in the world's code tasks.
"""

from __future__ import annotations

import ast
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from arcforge.envs.sandbox_types import Sandbox, SandboxError
from arcforge.types import Tool

# the tools every SWE episode offers (SWEEnv), in the order its prompt lists them
SWE_TOOLS = ("view_function", "replace_function", "view_file", "search_code", "edit_file",
             "run_tests", "bash")  # fmt: skip
# the world's SWE tasks offer these (SWEEnv's `offered_tools`): edit_file and bash left out
WORLD_SWE_TOOLS = ("view_function", "replace_function", "view_file", "search_code", "run_tests")


@dataclass(frozen=True)
class Definition:
    path: str
    name: str  # "fn" or "Class.fn"
    start: int  # 1-based first line, decorators included
    end: int  # 1-based last line


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
        out.append(Definition(path, name, start, node.end_lineno or node.lineno))

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


def _matches(d: Definition, name: str) -> bool:
    return d.name == name or d.name.rsplit(".", 1)[-1] == name


def definition_at(source: str, path: str, name: str, line: int) -> Definition:
    """The definition of `name` in `source` that spans `line` (1-based), e.g. a bug's function.

    Raises:
        ValueError: when no such definition spans that line.
    """
    for d in definitions(source, path):
        if _matches(d, name) and d.start <= line <= d.end:
            return d
    raise ValueError(f"{path}: no definition of {name!r} spans line {line}")


def function_tools(sb: Sandbox, timeout: float, skip: Callable[[str], bool]) -> dict[str, Tool]:
    """view_function and replace_function bound to one sandbox; `skip(rel_path)` leaves a file
    out of the search (SWEEnv passes `is_protected`: tests and runner files)."""

    def find(name: str, path: str) -> tuple[list[tuple[Definition, str]], str]:
        """(definitions of `name` with their file's text, error): files are read once."""
        bare = name.rsplit(".", 1)[-1]
        if not bare.isidentifier():
            return [], f"error: {name!r} is not a function name"
        if path:
            files = [path.removeprefix("/workspace/").removeprefix("./")]
        else:
            pat = shlex.quote(rf"def\s+{bare}\s*\(")
            res = sb.exec(f"grep -rlIE --include='*.py' --exclude-dir=.git -e {pat} . | head -n 50",
                          timeout=timeout)  # fmt: skip
            files = [
                f.removeprefix("./") for f in res.stdout.split() if not skip(f.removeprefix("./"))
            ]
        found = []
        for f in sorted(files):
            try:
                text = sb.read_file(f)
            except SandboxError as err:
                return [], f"error: cannot read {f}: {err}"
            found += [(d, text) for d in definitions(text, f) if _matches(d, name)]
        if not found:
            where = f" in {path}" if path else ""
            return [], f"error: no function {name!r} is defined{where}; use search_code to look"
        return found, ""

    def view_function(name: str, path: str = "") -> str:
        """Show a function's code with its file and line numbers.

        Args:
            name: e.g. "parse", or "Parser.parse" for a method.
            path: its file, only when several files define it.
        """
        found, err = find(str(name), str(path))
        if err:
            return err
        blocks = [show_definition(d, text) for d, text in found[:5]]
        more = f"\n({len(found) - 5} more definitions not shown)" if len(found) > 5 else ""
        return "\n\n".join(blocks) + more

    def replace_function(name: str, code: str, path: str = "") -> str:
        """Replace a function's whole definition with new code.

        Args:
            name: the function's name.
            code: the new definition, from its def line.
            path: its file, only when several files define it.
        """
        found, err = find(str(name), str(path))
        if err:
            return err
        if len(found) > 1:
            where = ", ".join(f"{d.path}:{d.start}" for d, _ in found[:10])
            return f"error: {name!r} is defined {len(found)} times ({where}); pass path"
        (d, source), bare = found[0], str(name).rsplit(".", 1)[-1]
        code = textwrap.dedent(str(code).strip("\n")) + "\n"
        if not any(d2.name == bare for d2 in definitions(code, "<code>")):
            return f"error: code must be a valid Python definition of {bare!r} (def {bare}(...):)"
        lines = source.splitlines(keepends=True)
        first = lines[d.start - 1]
        indent = first[: len(first) - len(first.lstrip())]
        body = "".join(indent + ln if ln.strip() else ln
                       for ln in code.rstrip("\n").splitlines(keepends=True))  # fmt: skip
        text = "".join(lines[: d.start - 1]) + body + "\n" + "".join(lines[d.end :])
        try:
            ast.parse(text)
        except SyntaxError as e:
            return (
                f"error: the file would not parse after the replacement (line {e.lineno}: {e.msg})"
            )
        sb.write_file(d.path, text)
        return f"ok: replaced {d.name} in {d.path} (lines {d.start}-{d.end})"

    return {f.__name__: Tool.from_function(f) for f in (view_function, replace_function)}
