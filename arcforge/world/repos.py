"""Tiny Python repositories with pytest suites, and single-bug injection (SWE-smith style).

A repo is 2-4 modules built from `codelib` templates plus one test file per module whose
expected values were computed by running the correct code. `Repo.inject_bug` applies one AST
located, text-level mutation (operator swap, off-by-one, wrong return, dropped condition) and
keeps it only if at least one test fails, checked in-process (fast); the issue text reports the
symptom of a failing call. `Repo.materialize` writes the files, optionally as a git history
(initial commit, the bug commit = SWE base, the fix commit that references the issue).
"""

from __future__ import annotations

import ast
import difflib
import random
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from arcforge.world.codelib import BY_KEY, TEMPLATES, THEMES, call_repr, call_src, load_source

BUG_KINDS = ("operator_swap", "off_by_one", "wrong_return", "dropped_condition")
SWAP = {"+": "-", "-": "+", "*": "+", "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=",
        "!=": "=="}  # fmt: skip


@dataclass
class TestCase:
    """One assert of one pytest function: `assert <call> == <expected>`."""

    path: str  # test file
    test: str  # test function name
    call: str
    expected: str

    @property
    def node_id(self) -> str:
        return f"{self.path}::{self.test}"


@dataclass
class Bug:
    repo: str
    path: str
    original: str  # whole file, correct
    mutated: str  # whole file, with the bug
    kind: str
    function: str
    line: int
    issue_text: str
    fix_diff: str  # unified diff mutated -> original, `git apply`-able
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)


@dataclass
class Repo:
    name: str
    package: str
    files: dict[str, str]
    tests: dict[str, str]
    description: str
    cases: list[TestCase] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Repo:
        return cls(**{**d, "cases": [TestCase(**c) for c in d["cases"]]})

    def renamed(self, name: str) -> Repo:
        """The same repo under another name: the package directory, imports, docstrings and
        test paths follow (world option `swe_fresh_repos`: SWE train tasks in repos whose
        names SFT cannot memorize, so the agent learns to copy the path the issue names)."""
        package = name.replace("-", "_")

        def sub(text: str) -> str:
            return text.replace(self.package, package).replace(self.name, name)

        return Repo(name, package, {sub(p): sub(t) for p, t in self.files.items()},
                    {sub(p): sub(t) for p, t in self.tests.items()}, sub(self.description),
                    [TestCase(sub(c.path), c.test, c.call, c.expected) for c in self.cases])  # fmt: skip

    def functions(self) -> list[str]:
        """The names of the functions its modules define, in file order."""
        out = []
        for src in self.files.values():
            tree = ast.parse(src)
            out += [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        return out

    def functions_renamed(self, names: dict[str, str]) -> Repo:
        """The same repo with functions renamed (`names`: old -> new) in its modules, tests
        (test names `test_<old>_N` too) and cases (world option `swe_fresh_functions`: SWE
        train tasks whose function names SFT cannot memorize, so the agent copies the one the
        issue names into view_function / replace_function)."""
        import re

        pats = [(re.compile(rf"(?<![A-Za-z0-9_]){re.escape(o)}(?![A-Za-z0-9_])"), n)
                for o, n in sorted(names.items(), key=lambda kv: -len(kv[0]))]  # fmt: skip

        def sub(text: str) -> str:
            for pat, new in pats:
                text = pat.sub(new, text)
            return text

        def sub_tests(text: str) -> str:  # test_<old>_N: the name sits between underscores
            for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(f"test_{old}_", f"test_{new}_")
            return text

        return Repo(self.name, self.package, {p: sub(t) for p, t in self.files.items()},
                    {p: sub(sub_tests(t)) for p, t in self.tests.items()}, self.description,
                    [TestCase(c.path, sub_tests(c.test), sub(c.call), c.expected) for c in self.cases])  # fmt: skip

    def run_tests(self, files: dict[str, str] | None = None) -> dict[str, bool]:
        """In-process run of every test: node id -> passed. `files` overrides module sources."""
        files = {**self.files, **(files or {})}
        namespaces: dict[str, dict | None] = {}
        for path, src in files.items():
            try:
                namespaces[path] = load_source(src)
            except Exception:  # noqa: BLE001 - a mutant may not even import
                namespaces[path] = None
        results: dict[str, bool] = {}
        for c in self.cases:
            ns = namespaces.get(self._module_for(c.path))
            ok = ns is not None and call_repr(ns, c.call) == c.expected
            results[c.node_id] = results.get(c.node_id, True) and ok
        return results

    def _module_for(self, test_path: str) -> str:
        return f"{self.package}/{Path(test_path).stem.removeprefix('test_')}.py"

    def inject_bug(self, rng: random.Random) -> Bug:
        """A random single mutation that makes at least one test fail."""
        candidates = [(p, m) for p in sorted(self.files) for m in _mutations(self.files[p])]
        rng.shuffle(candidates)
        for path, (kind, func, line, mutated) in candidates:
            results = self.run_tests({path: mutated})
            failing = [n for n, ok in results.items() if not ok]
            if failing:
                return Bug(self.name, path, self.files[path], mutated, kind, func, line,
                           self._issue(path, mutated, failing[0]), unified_diff(path, mutated, self.files[path]),
                           failing, [n for n, ok in results.items() if ok])  # fmt: skip
        raise ValueError(f"repo {self.name}: no mutation breaks a test")

    def _issue(self, path: str, mutated: str, node_id: str) -> str:
        case = next(c for c in self.cases if c.node_id == node_id and self._fails(c, path, mutated))
        try:
            actual = call_repr(load_source(mutated), case.call)
        except Exception as exc:  # noqa: BLE001
            actual = f"raises {type(exc).__name__} on import"
        fn = case.call.split("(")[0]
        shown = actual if actual.startswith("raises") else f"returns {actual}"
        return (f"`{fn}` gives a wrong result\n\nCalling `{case.call}` (from `{path}`) {shown}, "
                f"but {case.expected} was expected.")  # fmt: skip

    def _fails(self, c: TestCase, path: str, mutated: str) -> bool:
        return (
            self._module_for(c.path) == path and self.run_tests({path: mutated})[c.node_id] is False
        )

    def materialize(self, root: str | Path, git: bool = False, bug: Bug | None = None) -> list[str]:
        """Write the repo under `root`. Without git, a given bug is applied (the SWE base state).
        With git: commits initial (clean) -> base (bug) -> fix; returns the commit shas."""
        root = Path(root)
        files = {**self.files, **self.tests, "README.md": f"# {self.name}\n\n{self.description}\n"}
        if not git:
            _write(root, {**files, **({bug.path: bug.mutated} if bug else {})})
            return []
        _write(root, files)
        _git(root, "init", "-q", "-b", "main")
        shas = [_commit(root, "Initial commit")]
        if bug:
            _write(root, {bug.path: bug.mutated})
            shas.append(_commit(root, f"Refactor {bug.function}"))
            _write(root, {bug.path: bug.original})
            title = bug.issue_text.splitlines()[0]
            shas.append(_commit(root, f"Fix {bug.function} (fixes #1: {title})"))
        return shas


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                 f"a/{path}", f"b/{path}")  # fmt: skip
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


_GIT_ID = ["-c", "user.name=arcforge", "-c", "user.email=world@arcforge.local",
           "-c", "commit.gpgsign=false"]  # fmt: skip


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *_GIT_ID, *args], cwd=root, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD")


def _mutations(source: str) -> list[tuple[str, str, int, str]]:
    """Every single-line mutation of `source`: (kind, function, line, mutated source)."""
    lines = source.splitlines(True)
    out: list[tuple[str, str, int, str]] = []

    def edit(kind: str, func: str, node: ast.AST, col0: int, col1: int, new: str) -> None:
        ln = node.lineno - 1  # type: ignore[attr-defined]
        text = lines[ln]
        mutated = text[:col0] + new + text[col1:]
        if mutated != text:
            out.append((kind, func, ln + 1, "".join(lines[:ln] + [mutated] + lines[ln + 1 :])))

    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for node in ast.walk(fn):
            one_line = getattr(node, "lineno", 0) == getattr(node, "end_lineno", -1)
            if not (one_line or isinstance(node, ast.If)):
                continue
            _mutate_node(node, lines, fn.name, params, edit)
    return out


def _mutate_node(node: ast.AST, lines: list[str], func: str, params: list[str], edit) -> None:
    text = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
    if isinstance(node, ast.BinOp | ast.Compare):
        left = node.left
        right = node.right if isinstance(node, ast.BinOp) else node.comparators[0]
        if isinstance(node, ast.Compare) and len(node.ops) != 1:
            return
        a, b = left.end_col_offset, right.col_offset
        op = text[a:b].strip()
        if op in SWAP and left.end_lineno == right.lineno:
            kind = "operator_swap"
            edit(kind, func, node, a, b, text[a:b].replace(op, SWAP[op]))
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 10:
        edit("off_by_one", func, node, node.col_offset, node.end_col_offset, str(node.value + 1))
    elif isinstance(node, ast.Return) and node.value is not None and params:
        v = node.value
        seg = text[v.col_offset : v.end_col_offset]
        new = params[0] if seg != params[0] else "None"
        edit("wrong_return", func, v, v.col_offset, v.end_col_offset, new)
    elif isinstance(node, ast.BoolOp):
        first = node.values[0]
        edit("dropped_condition", func, node, node.col_offset, node.end_col_offset,
             text[first.col_offset : first.end_col_offset])  # fmt: skip
    elif isinstance(node, ast.If) and node.test.lineno == node.test.end_lineno:
        t = node.test
        edit("dropped_condition", func, t, t.col_offset, t.end_col_offset, "True")


def make_repo(rng: random.Random, name: str, n_modules: int) -> Repo:
    """A repo of `n_modules` themed modules (3-5 functions each) and their pytest files."""
    package = name.replace("-", "_")
    themes = rng.sample(THEMES, min(n_modules, len(THEMES)))
    files = {f"{package}/__init__.py": f'"""{name}: small utility functions."""\n'}
    tests: dict[str, str] = {}
    cases: list[TestCase] = []
    for theme in sorted(themes):
        tpls = [t for t in TEMPLATES if t.theme == theme]
        chosen = sorted(rng.sample(tpls, min(len(tpls), rng.randint(3, 5))), key=lambda t: t.key)
        names = [rng.choice(t.names) for t in chosen]
        src = f'"""{theme.capitalize()} helpers for {name}."""\n\n\n' + "\n\n".join(
            BY_KEY[t.key].render(n) for t, n in zip(chosen, names)
        )
        path, tpath = f"{package}/{theme}.py", f"tests/test_{theme}.py"
        files[path] = src
        ns = load_source(src)
        body = [f"from {package}.{theme} import {', '.join(sorted(names))}\n"]
        for t, n in zip(chosen, names):
            for i in range(3):
                call = call_src(n, t.gen(rng))
                expected = call_repr(ns, call)
                test = f"test_{n}_{i}"
                cases.append(TestCase(tpath, test, call, expected))
                body.append(f"\ndef {test}():\n    assert {call} == {expected}\n")
        tests[tpath] = "\n".join(body)
    desc = f"{name} is a small library of {', '.join(sorted(themes))} helpers."
    return Repo(name, package, files, tests, desc, cases)
