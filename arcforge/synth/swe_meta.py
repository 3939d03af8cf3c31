"""SWE-bench fields of an instance from a real repository, and the test files a patch needs.

SWE-bench's schema (the `swebench` package's `SWEbenchInstance`): `repo` is `owner/name`, read
from the git remote (or given); `instance_id` is `owner__name-N` with N the pull request number
the commit message names ("(#123)", "Merge pull request #123"), else the commit's short sha;
`version` is the package's `major.minor` at the base commit (static metadata, setup.cfg,
`__version__`, else the newest tag reachable from it, which is what setuptools-scm and hatch-vcs
report); FAIL_TO_PASS / PASS_TO_PASS are JSON-encoded lists. The harness fields of swebench 5
(`image`, `log_parser`, `eval_type`, `eval_script`) are filled for pytest: `eval_script` is the
script that applies the test patch and runs the test files between the official markers.

A test patch that changes only shared helpers (`conftest.py`, `tests/__init__.py`,
`tests/helpers.py`) names no test file to run: `helper_test_files` finds the test files that
import those helpers (or sit under the conftest's directory).

The output files of a synthesis run live here too: instances.jsonl (`to_instance`) and
drops.jsonl (every dropped candidate with the output that explains it).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from arcforge.envs.swe_repo_env import END, START
from arcforge.envs.swe_venv import InstallSpec
from arcforge.synth import swe_git as G
from arcforge.synth.pipeline import Record, journal_entries

_REMOTE = re.compile(
    r"(?:github\.com|gitlab\.com|bitbucket\.org)[:/]+([\w.-]+)/([\w.-]+?)(?:\.git)?/*$"
)
_PR = re.compile(r"(?:\(#(\d+)\)|pull request #(\d+)|\bPR #?(\d+)|\(gh-(\d+)\))", re.I)
_VERSION = re.compile(r"""^\s*(?:__version__|VERSION|version)\s*[:=]\s*['"]([^'"]+)['"]""", re.M)


def repo_slug(repo: Path, given: str | None = None) -> str:
    """`owner/name` of a repository: `given`, else its origin (or first) remote, else
    `local/<directory name>`."""
    if given:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", given):
            raise ValueError(f"--repo-name must be owner/name, got {given!r}")
        return given
    remotes = G.git(repo, "remote", check=False).split()
    for r in sorted(remotes, key=lambda x: x != "origin"):
        url = G.git(repo, "remote", "get-url", r, check=False).strip()
        m = _REMOTE.search(url)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
    name = re.sub(r"[^\w.-]", "_", repo.resolve().name)
    return f"local/{name}"


def pr_number(message: str) -> str | None:
    """The pull request number a commit message names, if any."""
    m = _PR.search(message)
    return next((g for g in m.groups() if g), None) if m else None


def instance_id(slug: str, n: str) -> str:
    return f"{slug.replace('/', '__')}-{n}"


def _major_minor(v: str) -> str | None:
    m = re.match(r"v?(\d+)\.(\d+)", v.strip())
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    m = re.match(r"v?(\d+)$", v.strip())
    return f"{m.group(1)}.0" if m else None


def _show(repo: Path, commit: str, path: str) -> str:
    return G.git(repo, "show", f"{commit}:{path}", check=False)


def package_version(repo: Path, commit: str) -> str:
    """`major.minor` of the package at `commit` (see the module docstring); "0.0" if unknown."""
    try:
        data = tomllib.loads(_show(repo, commit, "pyproject.toml"))
    except tomllib.TOMLDecodeError:
        data = {}
    for v in (
        data.get("project", {}).get("version"),
        data.get("tool", {}).get("poetry", {}).get("version"),
    ):
        if isinstance(v, str) and _major_minor(v):
            return _major_minor(v) or "0.0"
    m = re.search(r"^version\s*=\s*([^\s#]+)", _show(repo, commit, "setup.cfg"), re.M)
    if m and _major_minor(m.group(1)):
        return _major_minor(m.group(1)) or "0.0"
    files = G.git(repo, "ls-tree", "-r", "--name-only", commit).split()
    cands = [
        f
        for f in files
        if f.endswith(("__init__.py", "__about__.py", "_version.py", "version.py", "setup.py"))
        and f.count("/") <= 2
        and not G.is_test_path(f)
    ]
    for f in sorted(cands, key=lambda x: (x.count("/"), x)):
        m = _VERSION.search(_show(repo, commit, f))
        if m and _major_minor(m.group(1)):
            return _major_minor(m.group(1)) or "0.0"
    tag = G.git(repo, "describe", "--tags", "--abbrev=0", commit, check=False).strip()
    return (
        _major_minor(tag.rsplit("-", 1)[-1] if "-" in tag and not tag[0].isdigit() else tag)
        or "0.0"
    )


def eval_script(test_patch: str, files: list[str], base_commit: str) -> str:
    """SWE-bench's eval.sh for a pytest repository: reset the test files, apply the test patch,
    run the tests between the official markers, reset again."""
    touched = " ".join(G.patch_files(test_patch))
    return (
        "\n".join(
            [
                "#!/bin/bash",
                "set -uxo pipefail",
                "cd /testbed",
                f"git checkout {base_commit} {touched}".rstrip(),
                "git apply -v - <<'EOF_114329324912'",
                test_patch.rstrip("\n"),
                "EOF_114329324912",
                f": '{START}'",
                "pytest -rA " + " ".join(files),
                f": '{END}'",
                f"git checkout {base_commit} {touched}".rstrip(),
            ]
        )
        + "\n"
    )


def _is_test_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def helper_test_files(tree: Path, changed: list[str], limit: int = 40) -> list[str]:
    """Test files of `tree` to run for a test patch touching `changed`: its own test files, and
    for each shared helper the test files that import it (a conftest.py: every test file under
    its directory)."""
    own = [f for f in changed if _is_test_file(f)]
    helpers = [f for f in changed if f.endswith(".py") and not _is_test_file(f)]
    if not helpers:
        return own
    all_tests = sorted(
        p.relative_to(tree).as_posix() for p in tree.rglob("*.py") if _is_test_file(p.name)
    )
    found = set(own)
    for h in helpers:
        parent = h.rsplit("/", 1)[0] if "/" in h else ""
        under = [t for t in all_tests if t.startswith(parent + "/") or not parent]
        if h.endswith(("conftest.py", "__init__.py")):  # every test module below loads it
            found |= set(under)
            continue
        parts = h[:-3].split("/")
        mods = "|".join(re.escape(".".join(parts[i:])) for i in range(len(parts)))
        absolute = re.compile(rf"^\s*(?:from\s+(?:{mods})\s+import|import\s+(?:{mods})\b)", re.M)
        leaf = re.escape(parts[-1])
        relative = re.compile(rf"^\s*from\s+\.+(?:{leaf}\b|\s*import\s+[^\n]*\b{leaf}\b)", re.M)
        for t in all_tests:
            text = (tree / t).read_text(errors="replace")
            if absolute.search(text) or (t in under and relative.search(text)):
                found.add(t)
    return sorted(found)[:limit]


INSTANCE_KEYS = (  # swebench.types.SWEbenchInstance, in its order
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "environment_setup_commit",
)
OUTPUTS = ("instances.jsonl", "drops.jsonl", "summary.json", "validate.jsonl", "statement.jsonl")


def to_instance(rec: Record) -> dict[str, Any]:
    """The SWE-bench instance of a validated record: the official fields (test lists as
    JSON-encoded strings), swebench 5's harness fields for pytest, then ours: repo_path (the
    local clone) and install (how its environment is built)."""
    d = rec.data
    base = d["base_commit"]
    tests = d.get("test_files") or sorted({t.split("::")[0] for t in d["FAIL_TO_PASS"]})
    inst = {
        **{k: d.get(k) for k in INSTANCE_KEYS},
        "instance_id": rec.id,
        "hints_text": d.get("hints_text") or "",
        "version": d.get("version") or "0.0",
        "environment_setup_commit": d.get("environment_setup_commit") or base,
        "FAIL_TO_PASS": json.dumps(d["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.dumps(d["PASS_TO_PASS"]),
    }
    return {
        **inst,
        "image": _image(rec.id),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "eval_script": eval_script(d.get("test_patch") or "", tests, base),
        "repo_path": d.get("repo_path"),
        "install": d.get("install") or InstallSpec().to_dict(),
    }


def _image(iid: str) -> str:
    """The image name SWE-bench's harness derives for an instance (not built here)."""
    return f"swebench/sweb.eval.x86_64.{iid.lower()}:latest".replace("__", "_1776_")


def write_instances(records: list[Record], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(to_instance(r)) + "\n" for r in records))
    return path


def write_drops(out_dir: Path) -> Path:
    """drops.jsonl: every dropped candidate with its reason and the output that explains it
    (pip's for a failed install, pytest's for no collection or no FAIL_TO_PASS)."""
    path = out_dir / "drops.jsonl"
    lines = [
        {"id": e["input"], "reason": e["dropped"], "output": e.get("detail", "")}
        for e in journal_entries(out_dir / "validate.jsonl")
        if e.get("dropped")
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def clear_outputs(out_dir: Path) -> list[str]:
    """Delete the journals and outputs of an earlier run (`--fresh`); returns what went."""
    gone = [n for n in OUTPUTS if (out_dir / n).exists()]
    for n in gone:
        (out_dir / n).unlink()
    return gone
