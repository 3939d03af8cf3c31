"""Package layering: no import cycle between arcforge's packages nor between its files, counting
imports inside functions (they hide a cycle from Python's import machinery but not from a
reader); the leaves stay leaves (`world` builds on `types` alone, the sandbox on nothing of
arcforge); and docs/design.md's module map names every package and top-level module."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "arcforge"


def _unit(module: str) -> str:
    """arcforge.x.y -> x (a subpackage or a top-level module); arcforge -> arcforge."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "arcforge"


def import_graph(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """{unit: {imported unit: {files importing it}}} over every import statement."""
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        src = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    names = [".".join(base + ([node.module] if node.module else []))]
                else:
                    names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.startswith("arcforge.") and _unit(name) != src:
                    edges[src][_unit(name)].add(str(rel))
    return edges


def file_graph(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """{module: {imported module: {module}}} between arcforge's files, every import statement.

    `from pkg import name` counts as an import of `pkg.name` when that is a module, else of
    `pkg` (its __init__); a package's __init__ imported by its own submodules does not count
    (Python runs it first either way)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        modules[".".join(rel.parts).removesuffix(".__init__")] = path
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(
                        parts[: len(parts) - node.level + 1]
                        + ([node.module] if node.module else [])
                    )
                else:
                    base = node.module or ""
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                names = subs if len(subs) == len(node.names) else [base, *subs]
            else:
                continue
            for name in names:
                if name not in modules or name == module:
                    continue
                if modules[name].name == "__init__.py" and module.startswith(name + "."):
                    continue
                edges[module][name].add(module)
    return edges


def cycles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_no_package_level_import_cycle():
    edges = import_graph()
    found = cycles(edges)
    detail = [
        f"{a} -> {b} ({', '.join(sorted(files))})"
        for comp in found
        for a in comp
        for b, files in sorted(edges[a].items())
        if b in comp
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(detail)


def test_no_file_level_import_cycle():
    edges = file_graph()
    found = cycles(edges)
    detail = [f"{a} -> {b}" for comp in found for a in comp for b in edges[a] if b in comp]
    assert not found, "import cycles between files:\n" + "\n".join(sorted(detail))


def test_file_graph_sees_a_cycle_inside_a_package(tmp_path):
    pkg = tmp_path / "arcforge" / "p"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from arcforge.p import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n    return g\n")
    assert cycles(file_graph(tmp_path / "arcforge")) == [["arcforge.p.a", "arcforge.p.b"]]


def test_design_module_map_names_every_package_and_module():
    design = (ROOT.parent / "docs" / "design.md").read_text()
    block = design.split("## Module map", 1)[1].split("```", 2)[1]
    listed = {ln.split()[0] for ln in block.splitlines() if re.match(r"  \S", ln)}
    on_disk = {p.name + "/" for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    on_disk |= {p.name for p in ROOT.glob("*.py") if p.name != "__init__.py"}
    assert not on_disk - listed, f"docs/design.md's module map lacks {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"docs/design.md's module map names {sorted(listed - on_disk)}"


def test_world_builds_on_types_alone():
    assert set(import_graph()["world"]) <= {"types"}


def test_the_graph_sees_function_local_imports(tmp_path):
    pkg = tmp_path / "arcforge"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "a" / "m.py").write_text("from arcforge.b.n import f\n")
    (pkg / "b" / "n.py").write_text("def f():\n    from arcforge.a import m\n    return m\n")
    assert cycles(import_graph(pkg)) == [["a", "b"]]
