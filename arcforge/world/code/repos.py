"""Tiny Python repositories with pytest suites, and single-bug injection (SWE-smith style).

A repo is 2-4 modules built from `codelib` templates plus one test file per module whose
expected values were computed by running the correct code. `Repo.inject_bug` applies one of
`mutations`' AST-located, text-level bugs and builds its tests as SWE-bench does: the agent's
repo keeps the visible tests minus every one that fails under the bug, and a hidden version of
the module's test file adds 1-3 FAIL_TO_PASS tests over fresh inputs (plus a few that pass
either way); the issue text reports the symptom of yet another failing call, so no graded test
is in the issue. Everything is checked in-process (fast). `Repo.materialize` writes the files,
optionally as a git history (initial commit, the bug commit = SWE base without the failing
tests, the fix commit with the hidden tests, which references the issue).
"""

from __future__ import annotations

import ast
import difflib
import random
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from arcforge.world.code.bugtests import add_tests, drop_tests, expected_value, fresh_calls, passes
from arcforge.world.code.codelib import FuncTemplate, call_repr, informative_calls, load_source
from arcforge.world.code.mutations import KINDS, Mutation, mutations

MAX_F2P = 3  # hidden tests that fail under the bug (SWE-bench instances mostly have 1-3)
MAX_HIDDEN_P2P = 2  # hidden tests over fresh inputs that pass with and without the bug
TRIES_PER_KIND = 40  # candidate mutations of one kind checked before the next kind


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
    """One injected bug with its SWE-bench-style tests.

    function / line / end_line: the function the mutation edits and the lines of `original` it
    touches. issue_function / issue_call: the call the issue reports (a caller of `function`
    when the bug shows through it). hidden_tests: test path -> that file as graded (the
    visible file plus the new tests: SWE-bench's test_patch applied); never in the agent's
    repo. removed_tests: visible node ids that fail under the bug, left out of the agent's
    repo. fail_to_pass: hidden tests that fail under the bug; pass_to_pass: the visible tests
    kept plus hidden ones that pass either way."""

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
    end_line: int = 0
    issue_function: str = ""
    issue_call: str = ""
    detail: str = ""  # what the mutation changed, e.g. "`<` -> `<=`"
    hidden_tests: dict[str, str] = field(default_factory=dict)
    removed_tests: list[str] = field(default_factory=list)

    def fixed_definition(self) -> str:
        """The whole definition of `function` as the correct module has it (the oracle fix)."""
        node = next(
            n
            for n in ast.parse(self.original).body
            if isinstance(n, ast.FunctionDef) and n.name == self.function
        )
        lines = self.original.splitlines(keepends=True)
        return "".join(lines[node.lineno - 1 : node.end_lineno])


@dataclass
class Repo:
    name: str
    package: str
    files: dict[str, str]
    tests: dict[str, str]
    description: str
    cases: list[TestCase] = field(default_factory=list)
    split: str = "train"  # "test": built from held-out functions, behind held-out items only
    # per function name, more calls than the tests make (fresh inputs for hidden tests)
    probe_calls: dict[str, list[str]] = field(default_factory=dict)

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

        return Repo(
            name,
            package,
            {sub(p): sub(t) for p, t in self.files.items()},
            {sub(p): sub(t) for p, t in self.tests.items()},
            sub(self.description),
            [TestCase(sub(c.path), c.test, c.call, c.expected) for c in self.cases],
            self.split,
            self.probe_calls,
        )

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

        pats = [
            (re.compile(rf"(?<![A-Za-z0-9_]){re.escape(o)}(?![A-Za-z0-9_])"), n)
            for o, n in sorted(names.items(), key=lambda kv: -len(kv[0]))
        ]

        def sub(text: str) -> str:
            for pat, new in pats:
                text = pat.sub(new, text)
            return text

        def sub_tests(text: str) -> str:  # test_<old>_N: the name sits between underscores
            for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
                text = text.replace(f"test_{old}_", f"test_{new}_")
            return text

        return Repo(
            self.name,
            self.package,
            {p: sub(t) for p, t in self.files.items()},
            {p: sub(sub_tests(t)) for p, t in self.tests.items()},
            self.description,
            [TestCase(c.path, sub_tests(c.test), sub(c.call), c.expected) for c in self.cases],
            self.split,
            {names.get(f, f): [sub(c) for c in cs] for f, cs in self.probe_calls.items()},
        )

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

    def _test_path(self, module_path: str) -> str:
        return f"tests/test_{Path(module_path).stem}.py"

    def workspace_tests(self, removed: list[str]) -> dict[str, str]:
        """The test files as the agent's repo holds them: without the tests in `removed`."""
        out = {}
        for path, text in self.tests.items():
            names = {n.split("::", 1)[1] for n in removed if n.split("::", 1)[0] == path}
            out[path] = drop_tests(text, names)
        return out

    def inject_bug(self, rng: random.Random, kinds: list[str] | None = None) -> Bug:
        """A random mutation (`mutations`) that at least two fresh calls expose, with its
        hidden tests (one exposing call goes to the issue, 1-3 others become FAIL_TO_PASS).

        Kinds are tried in turn: `kinds` in the order given, else every kind the repo has in a
        random order (each kind about equally likely, however many sites it has); up to
        TRIES_PER_KIND random candidates of a kind are checked before the next kind.

        Raises:
            ValueError: for an unknown kind, or when no candidate of the kinds tried is caught.
        """
        unknown = sorted(set(kinds or ()) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown bug kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
        by_kind: dict[str, list[tuple[str, Mutation]]] = {}
        for path in sorted(self.files):
            for m in mutations(self.files[path]):
                by_kind.setdefault(m.kind, []).append((path, m))
        order = [k for k in (kinds or KINDS) if k in by_kind]
        if kinds is None:
            rng.shuffle(order)
        fresh: dict[str, list[tuple[str, str, str]]] = {}
        for kind in order:
            cands = by_kind[kind]
            for path, m in rng.sample(cands, min(len(cands), TRIES_PER_KIND)):
                bug = self._as_bug(rng, path, m, fresh)
                if bug is not None:
                    return bug
        if not order:
            wanted = ", ".join(kinds or ["any"])
            raise ValueError(f"repo {self.name} has no mutation of kind {wanted}")
        raise ValueError(f"repo {self.name}: no mutation of kind {', '.join(order)} is caught")

    def _fresh(self, rng: random.Random, path: str, cache: dict) -> list[tuple[str, str, str]]:
        """[(function, call, expected)] over inputs no visible test uses, for every function of
        the module at `path` (computed once per inject_bug call: `cache`)."""
        if path not in cache:
            ns = load_source(self.files[path])
            visible = [c.call for c in self.cases]
            out = []
            for node in ast.parse(self.files[path]).body:
                if not isinstance(node, ast.FunctionDef):
                    continue
                own = [c for c in visible if c.split("(", 1)[0] == node.name]
                for call in fresh_calls(rng, self.probe_calls.get(node.name, []), own):
                    want = expected_value(ns, call)
                    if want is not None and call not in visible:
                        out.append((node.name, call, want))
            cache[path] = out
        return cache[path]

    def _as_bug(self, rng: random.Random, path: str, m: Mutation, cache: dict) -> Bug | None:
        """The bug `m` with its tests, or None when fewer than two fresh calls expose it."""
        try:
            ns_bug: dict | None = load_source(m.mutated)
        except Exception:  # noqa: BLE001 - a mutant may not even import
            ns_bug = None
        calls = self._fresh(rng, path, cache)
        fail = [c for c in calls if not passes(ns_bug, c[1], c[2])]
        if len(fail) < 2:
            return None
        own = [c for c in fail if c[0] == m.function]
        callers = [c for c in fail if c[0] != m.function]  # the bug shows through them
        issue = rng.choice(callers if callers and (not own or rng.random() < 0.5) else own)
        rest = [c for c in fail if c != issue]
        f2p = rng.sample(rest, min(MAX_F2P, len(rest)))
        hold = sorted((c for c in calls if c not in fail), key=lambda c: c[0] != m.function)
        p2p = hold[:MAX_HIDDEN_P2P]
        results = self.run_tests({path: m.mutated})
        removed = [n for n, ok in results.items() if not ok]
        tpath = self._test_path(path)
        new = self._name_tests(tpath, [*f2p, *p2p])
        stem = Path(path).stem
        hidden = add_tests(self.workspace_tests(removed)[tpath], f"{self.package}.{stem}", new)
        ids = [f"{tpath}::{name}" for name, _, _ in new]
        kept = [n for n, ok in results.items() if ok]
        return Bug(
            self.name,
            path,
            self.files[path],
            m.mutated,
            m.kind,
            m.function,
            m.line,
            self._issue(path, ns_bug, issue[1], issue[2]),
            unified_diff(path, m.mutated, self.files[path]),
            ids[: len(f2p)],
            kept + ids[len(f2p) :],
            m.end_line,
            issue[0],
            issue[1],
            m.detail,
            {tpath: hidden},
            removed,
        )

    def _name_tests(self, tpath: str, calls: list[tuple[str, str, str]]) -> list[tuple]:
        """[(test name, call, expected)]: `test_<function>_<k>`, k counting on from the
        function's visible tests in `tpath`."""
        nxt: dict[str, int] = {}
        for c in self.cases:
            fn = c.call.split("(", 1)[0]
            hit = re.fullmatch(rf"test_{re.escape(fn)}_(\d+)", c.test)
            if c.path == tpath and hit:
                nxt[fn] = max(nxt.get(fn, 0), int(hit.group(1)) + 1)
        out = []
        for fn, call, want in calls:
            k = nxt.get(fn, 0)
            nxt[fn] = k + 1
            out.append((f"test_{fn}_{k}", call, want))
        return out

    def _issue(self, path: str, ns_bug: dict | None, call: str, expected: str) -> str:
        actual = call_repr(ns_bug, call) if ns_bug is not None else "raises an error on import"
        fn = call.split("(")[0]
        shown = actual if actual.startswith("raises") else f"returns {actual}"
        return (
            f"`{fn}` gives a wrong result\n\nCalling `{call}` (from `{path}`) {shown}, "
            f"but {expected} was expected."
        )

    def materialize(self, root: str | Path, git: bool = False, bug: Bug | None = None) -> list[str]:
        """Write the repo under `root`. Without git, a given bug is applied (the SWE base state:
        the bug, and test files without the tests it fails; never the hidden tests). With git:
        commits initial (clean) -> base (that state) -> fix (the fix and the hidden tests, as a
        SWE-bench PR adds its tests); returns the commit shas."""
        root = Path(root)
        files = {**self.files, **self.tests, "README.md": f"# {self.name}\n\n{self.description}\n"}
        base = files
        if bug:
            base = {**files, bug.path: bug.mutated, **self.workspace_tests(bug.removed_tests)}
        if not git:
            _write(root, base)
            return []
        _write(root, files)
        _git(root, "init", "-q", "-b", "main")
        shas = [_commit(root, "Initial commit")]
        if bug:
            _write(root, base)
            shas.append(_commit(root, f"Refactor {bug.function}"))
            _write(root, {bug.path: bug.original, **bug.hidden_tests})
            title = bug.issue_text.splitlines()[0]
            shas.append(_commit(root, f"Fix {bug.function} (fixes #1: {title})"))
        return shas


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


_GIT_ID = [
    "-c",
    "user.name=arcforge",
    "-c",
    "user.email=world@arcforge.local",
    "-c",
    "commit.gpgsign=false",
]


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *_GIT_ID, *args], cwd=root, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD")


MODULE_NAMES = {
    "lists": ("seq", "listops", "arrays", "series", "numeric", "vectors"),
    "numbers": ("ranges", "counting", "intops", "numtheory", "sequences"),
    "words": ("words", "textops", "tokens", "phrases", "wording"),
    "chars": ("letters", "charops", "glyphs", "spelling", "alphabet"),
    "records": ("tables", "inventory", "mappings", "ledger", "registry"),
}
COMPOSITE_NAMES = ("score", "delta", "balance", "gauge", "metric", "tally", "measure", "margin")
COMBINE = (("+", "plus"), ("-", "minus"), ("*", "times"))


def _composite(
    rng: random.Random, chosen: list[tuple[FuncTemplate, str]], taken: set[str]
) -> tuple[str, str, FuncTemplate] | None:
    """A function that calls two int-returning functions of the module on its argument and
    combines their results: what a cross-function bug needs (None when the module has no two)."""
    ints = [(t, n) for t, n in chosen if t.returns == "int" and "," not in t.params]
    if len(ints) < 2:
        return None
    (t1, n1), (t2, n2) = rng.sample(ints, 2)
    name = next(
        (
            f"{w}_{i}" if i else w
            for i in range(9)
            for w in rng.sample(COMPOSITE_NAMES, 3)
            if (f"{w}_{i}" if i else w) not in taken
        ),
    )
    op, word = rng.choice(COMBINE)
    p = {"lists": "xs", "numbers": "n", "words": "text", "chars": "s", "records": "d"}[t1.theme]
    src = (
        f'def {name}({p}):\n    """Return {n1}({p}) {word} {n2}({p})."""\n'
        f"    first = {n1}({p})\n    second = {n2}({p})\n    return first {op} second\n"
    )
    return name, src, t1


def make_repo(
    rng: random.Random,
    name: str,
    n_modules: int,
    functions: list[FuncTemplate],
    split: str = "train",
) -> Repo:
    """A repo of `n_modules` themed modules (3-5 functions of `functions` each, plus one that
    combines two of them where it can), their pytest files, and 8 more calls per function
    for hidden tests. Module file names are drawn per theme, so a file's name does not follow
    from a description by a fixed rule."""
    package = name.replace("-", "_")
    by_theme: dict[str, list[FuncTemplate]] = {}
    for t in functions:
        by_theme.setdefault(t.theme, []).append(t)
    themes = sorted(rng.sample(sorted(by_theme), min(n_modules, len(by_theme))))
    files = {f"{package}/__init__.py": f'"""{name}: small utility functions."""\n'}
    tests: dict[str, str] = {}
    cases: list[TestCase] = []
    probes: dict[str, list[str]] = {}
    for theme in themes:
        pool = by_theme[theme]
        picked = rng.sample(pool, min(len(pool), rng.randint(3, 5)))
        chosen = [(t, t.names[rng.randrange(len(t.names))]) for t in picked]
        chosen = list({n: (t, n) for t, n in chosen}.values())  # distinct names
        sources = [t.render(n) for t, n in chosen]
        gens = [(n, t.gen) for t, n in chosen]
        combo = _composite(rng, chosen, {n for _, n in chosen})
        if combo is not None:
            sources.append(combo[1])
            gens.append((combo[0], combo[2].gen))
        module = rng.choice(MODULE_NAMES[theme])
        src = f'"""{module.capitalize()} helpers for {name}."""\n\n\n' + "\n\n".join(sources)
        path, tpath = f"{package}/{module}.py", f"tests/test_{module}.py"
        files[path] = src
        ns = load_source(src)
        imported = sorted(n for n, _ in gens)
        body = [f"from {package}.{module} import {', '.join(imported)}\n"]
        for fn, gen in gens:
            picked = informative_calls(ns, fn, gen, rng, 14, tries=28)
            calls = [c for c, _ in picked]
            for i, (call, expected) in enumerate(picked[:3]):
                test = f"test_{fn}_{i}"
                cases.append(TestCase(tpath, test, call, expected))
                body.append(f"\ndef {test}():\n    assert {call} == {expected}\n")
            probes[fn] = calls[3:]
        tests[tpath] = "\n".join(body)
    desc = f"{name} is a small library of {', '.join(themes)} helpers."
    return Repo(name, package, files, tests, desc, cases, split, probes)
