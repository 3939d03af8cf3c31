"""The optional extras stay optional: no arcforge module imports ray, playwright or
reasoning-gym when it is imported, and using one without its package names the extra."""

import ast
import sys
import tomllib
from pathlib import Path

import pytest

from arcforge.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = {"ray": "ray", "browser": "playwright", "gym": "reasoning_gym"}


def module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, top-level package) of the imports that run when the module is imported: those
    outside function bodies (class bodies and top-level if/try blocks run at import)."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module.split(".")[0]))
        todo += list(ast.iter_child_nodes(node))
    return found


def test_optional_packages_are_extras_not_core():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for extra, module in OPTIONAL.items():
        dist = module.replace("_", "-")
        assert dist not in core, f"{dist} is a core dependency"
        assert any(dist in d for d in project["optional-dependencies"][extra])


def test_optional_packages_are_imported_lazily():
    eager = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "arcforge").rglob("*.py"))
        for line, name in module_level_imports(ast.parse(path.read_text()))
        if name in OPTIONAL.values()
    ]
    assert not eager, "import these inside the function that needs them:\n" + "\n".join(eager)


def test_missing_packages_name_their_extra(monkeypatch):
    from arcforge.browser import browser_missing
    from arcforge.data.reasoning_gym import load_reasoning_gym
    from arcforge.rollout.ray_backend import require_ray

    for module in OPTIONAL.values():
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    with pytest.raises(UserError, match=r"pip install 'arcforge\[ray\]'"):
        require_ray()
    assert "pip install 'arcforge[browser]'" in browser_missing()
    with pytest.raises(UserError, match=r"pip install 'arcforge\[gym\]'"):
        load_reasoning_gym("reasoning_gym:leg_counting")
