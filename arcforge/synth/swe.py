"""SWE task synthesis: executable bug-fix instances from a local git repository.

Two routes, both ending in SWE-bench-compatible instances that SWEEnv / check-task load
(`instance_id, repo, base_commit, patch, test_patch, problem_statement, FAIL_TO_PASS,
PASS_TO_PASS, created_at, repo_path`):

1. Issue-PR: fix commits that change both code and tests (swe_git.fix_commits), or SWE-bench
   style records given as JSONL (base_commit / patch / test_patch). The diff is split by path
   into the code `patch` and the `test_patch`; the test files of the test patch run in the
   sandbox at base, base + test_patch and base + test_patch + patch, `runs` times each
   (swe_validate): flaky tests are dropped, FAIL_TO_PASS / PASS_TO_PASS derived, and an
   instance with no FAIL_TO_PASS is dropped. The problem statement is the record's issue text
   or the commit message, optionally rewritten by an LLM as an issue report.
2. Synthetic bugs (SWE-smith): AST mutations (swe_bugs) of functions the tests name, on the
   repository's HEAD. A mutant is kept when it breaks at least one test (those are its F2P);
   its base commit is written into the synthesis's own clone of the repository (refs under
   refs/arcforge/bugs/), the fix patch is the reverse diff, and the problem statement is
   generated from the failing tests and their assertion messages.

Both run as synth pipelines (resumable, parallel, counted in summary.json).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcforge.errors import UserError
from arcforge.llm import LLMClient, LLMError
from arcforge.synth import swe_git as G
from arcforge.synth.pipeline import Drop, Pipeline, Record, Step
from arcforge.synth.swe_bugs import apply_mutation, find_mutations, pick_mutations
from arcforge.synth.swe_validate import classify, collect_ids, failure_lines, run_state

STATEMENT_PROMPT = (
    "Rewrite the following change description as a GitHub issue a user would file: describe the "
    "wrong behaviour and the expected behaviour, with a short example if the failing tests show "
    "one. Do not describe the fix or name the tests. Reply with the issue text only.\n\n"
    "Change description:\n{message}\n\nTests that fail before the change:\n{tests}\n\n"
    "Their errors:\n{errors}"
)


@dataclass
class SWESynthConfig:
    """Options of both routes.

    runs: test runs per repository state (flakiness check).
    backend: sandbox backend. timeout: seconds per pytest run.
    workers: candidates validated in parallel.
    llm: rewrites problem statements when set.
    max_commits: newest commits scanned. max_bugs: mutants tried. seed: mutant choice.
    """

    runs: int = 3
    backend: str = "bwrap"
    timeout: float = 300
    workers: int = 2
    llm: LLMClient | None = None
    max_commits: int = 200
    max_bugs: int = 20
    seed: int = 0


def _repo_name(repo: Path) -> str:
    return re.sub(r"[^\w.-]", "_", repo.resolve().name)


def commit_seeds(repo: Path, max_commits: int = 200) -> list[Record]:
    """One record per fix commit (code + tests) of `repo`."""
    name = _repo_name(repo)
    out = []
    for fc in G.fix_commits(repo, max_count=max_commits):
        patch, tpatch = G.split_diff(repo, fc.base, fc.sha)
        out.append(
            Record(
                f"{name}__{fc.sha[:12]}",
                {
                    "repo": name,
                    "repo_path": str(repo.resolve()),
                    "base_commit": fc.base,
                    "patch": patch,
                    "test_patch": tpatch,
                    "problem_statement": fc.message,
                    "created_at": fc.date,
                    "route": "commit",
                    "commit": fc.sha,
                },
            )
        )
    return out


def record_seeds(jsonl: Path, repo: Path) -> list[Record]:
    """SWE-bench style records (base_commit, patch, test_patch, ...) against `repo`."""
    out = []
    for n, line in enumerate(jsonl.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{jsonl}:{n}: not JSON ({err.msg})") from None
        missing = [k for k in ("instance_id", "base_commit", "patch", "test_patch") if k not in rec]
        if missing:
            raise UserError(f"{jsonl}:{n}: SWE-bench record lacks {', '.join(missing)}")
        data = {
            **rec,
            "repo": rec.get("repo") or _repo_name(repo),
            "repo_path": str(repo.resolve()),
            "route": "record",
            "problem_statement": rec.get("problem_statement") or "",
        }
        out.append(Record(str(rec["instance_id"]), data))
    return out


def _validate(rec: Record, cfg: SWESynthConfig) -> Record:
    """Build the three states, run the tests, keep the instance when it has F2P tests."""
    d = rec.data
    tests = [f for f in G.patch_files(d["test_patch"]) if f.endswith(".py")]
    if not tests:
        raise Drop("no test files in test_patch")
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-swe-synth-"))
    try:
        base = G.export_tree(d["repo_path"], d["base_commit"], tmp / "base")
        before = shutil.copytree(base, tmp / "before", symlinks=True)
        if err := G.apply_patch(before, d["test_patch"]):
            raise Drop("test_patch does not apply", err)
        after = shutil.copytree(before, tmp / "after", symlinks=True)
        if err := G.apply_patch(after, d["patch"]):
            raise Drop("patch does not apply", err)
        return _run_states(rec, tests, after, before, base, cfg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_states(
    rec: Record, tests: list[str], after: Path, before: Path, base: Path | None, cfg: SWESynthConfig
) -> Record:
    ids = collect_ids(after, tests, cfg.backend, cfg.timeout)
    if not ids:
        raise Drop("no tests collected after the fix")
    a = run_state(after, tests, ids, cfg.runs, cfg.backend, cfg.timeout)
    b = run_state(before, tests, ids, cfg.runs, cfg.backend, cfg.timeout)
    z = run_state(base, tests, ids, cfg.runs, cfg.backend, cfg.timeout) if base else None
    c = classify(ids, a, b, z)
    if not c.f2p:
        raise Drop("no FAIL_TO_PASS test", f"{len(ids)} collected, {len(c.flaky)} flaky")
    data = {
        **rec.data,
        "FAIL_TO_PASS": c.f2p,
        "PASS_TO_PASS": c.p2p,
        "flaky_tests": c.flaky,
        "failure_lines": failure_lines(b.output),
    }
    return Record(rec.id, data)


def statement_problem(original: str, text: str, f2p: list[str], patch: str) -> str | None:
    """Why an LLM-rewritten problem statement cannot replace `original` (None: it can).

    A rewrite must be an issue about the same code: non-trivial text that keeps at least one of
    the original's `code` names (the function or file the bug is in), and it must not leak the
    answer: no FAIL_TO_PASS test name, no line the fix adds."""
    if len(text) < 20:
        return "too short"
    names = set(re.findall(r"`([^`\n]+)`", original))
    idents = {re.split(r"[(\s]", n)[0] for n in names} - {""}
    if idents and not any(i in text for i in idents):
        return "lost the code names"
    for t in f2p:
        leaf = t.split("::")[-1].split("[")[0]
        if leaf and leaf in text:
            return "names a FAIL_TO_PASS test"
    added = [
        ln[1:].strip()
        for ln in patch.splitlines()
        if ln.startswith("+") and not ln.startswith("+++")
    ]
    if any(len(a) > 8 and a in text for a in added):
        return "quotes the fix"
    return None


def _statement(rec: Record, cfg: SWESynthConfig) -> Record:
    """Optional LLM rewrite of the problem statement (kept as is without an LLM). A rewrite
    that fails `statement_problem` is not used: the instance keeps its original statement and
    records why in `statement_rewrite` (the stage counts them)."""
    d = rec.data
    if cfg.llm is None:
        return rec
    prompt = STATEMENT_PROMPT.format(
        message=d["problem_statement"],
        tests="\n".join(d["FAIL_TO_PASS"][:10]),
        errors="\n".join(d.get("failure_lines") or []) or "(none)",
    )
    try:
        text = cfg.llm.chat([{"role": "user", "content": prompt}], max_tokens=400)[0]
    except LLMError as err:
        raise Drop("statement LLM failed", str(err)) from None
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    why = statement_problem(d["problem_statement"], text, d["FAIL_TO_PASS"], d.get("patch", ""))
    if why is not None:
        return Record(
            rec.id,
            {**d, "statement_rewrite": f"rejected: {why}", "rejected_statement": text[:2000]},
        )
    return Record(
        rec.id,
        {
            **d,
            "problem_statement": text,
            "original_statement": d["problem_statement"],
            "statement_rewrite": "accepted",
        },
    )


INSTANCE_KEYS = (
    "instance_id",
    "repo",
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
    "repo_path",
)


def to_instance(rec: Record) -> dict[str, Any]:
    """The SWE-bench-compatible instance of a validated record (plus repo_path)."""
    d = {
        **rec.data,
        "instance_id": rec.id,
        "hints_text": rec.data.get("hints_text", ""),
        "version": rec.data.get("version", "0"),
        "environment_setup_commit": rec.data.get("environment_setup_commit")
        or rec.data["base_commit"],
    }
    return {k: d.get(k) for k in INSTANCE_KEYS}


def write_instances(records: list[Record], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(to_instance(r)) + "\n" for r in records))
    return path


def synthesize_from_repo(
    repo: str | Path, out_dir: str | Path, cfg: SWESynthConfig, records: str | Path | None = None
) -> tuple[list[Record], Path]:
    """Route 1: fix commits of `repo` (or the SWE-bench records in `records`) -> instances.

    Returns the validated records and the path of instances.jsonl (summary.json beside it)."""
    top = G.check_repo(repo)
    seeds = record_seeds(Path(records), top) if records else commit_seeds(top, cfg.max_commits)
    steps = [
        Step("validate", lambda r: _validate(r, cfg), workers=cfg.workers),
        Step("statement", lambda r: _statement(r, cfg), workers=cfg.workers),
    ]
    out = Pipeline(steps, out_dir, workers=cfg.workers, name="swe").run(seeds)
    return out, write_instances(out, Path(out_dir) / "instances.jsonl")


# ----------------------------------------------------------------- synthetic bugs


def bug_seeds(repo: Path, clone: Path, cfg: SWESynthConfig) -> list[Record]:
    """Mutations of HEAD's functions that the test files name, up to cfg.max_bugs."""
    head = G.git(clone, "rev-parse", "HEAD").strip()
    files = G.git(clone, "ls-tree", "-r", "--name-only", head).split()
    test_text = "\n".join(
        G.git(clone, "show", f"{head}:{f}")
        for f in files
        if G.is_test_path(f) and f.endswith(".py")
    )
    names = set(re.findall(r"\b([A-Za-z_]\w*)\b", test_text))
    muts = []
    for f in files:
        if f.endswith(".py") and not G.is_test_path(f) and not f.startswith(("setup", "docs/")):
            muts += find_mutations(G.git(clone, "show", f"{head}:{f}"), f, names)
    name = _repo_name(repo)
    return [
        Record(
            f"{name}__bug_{i:03d}_{m.kind}",
            {
                "repo": name,
                "repo_path": str(clone),
                "head": head,
                "route": "synthetic",
                "mutation": m.__dict__,
                "path": m.path,
                "function": m.function,
            },
        )
        for i, m in enumerate(pick_mutations(muts, cfg.max_bugs, cfg.seed))
    ]


def _tests_naming(tree: Path, function: str) -> list[str]:
    return sorted(
        p.relative_to(tree).as_posix()
        for p in tree.rglob("*.py")
        if G.is_test_path(p.relative_to(tree).as_posix())
        and re.search(rf"\b{re.escape(function)}\b", p.read_text(errors="replace"))
    )


def _validate_bug(rec: Record, cfg: SWESynthConfig) -> Record:
    from arcforge.synth.swe_bugs import Mutation

    d, m = rec.data, Mutation(**rec.data["mutation"])
    clone, head = d["repo_path"], d["head"]
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-swe-bug-"))
    try:
        after = G.export_tree(clone, head, tmp / "after")
        original = (after / m.path).read_text()
        mutated = apply_mutation(original, m)
        before = shutil.copytree(after, tmp / "before", symlinks=True)
        (before / m.path).write_text(mutated)
        tests = _tests_naming(after, m.function)
        if not tests:
            raise Drop("no test names the function")
        res = _run_states(rec, tests, after, before, None, cfg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = G.commit_tree(
        clone,
        head,
        {m.path: mutated},
        f"synthetic bug: {m.kind} in {m.function}",
        f"refs/arcforge/bugs/{rec.id}",
    )
    patch = G.git(clone, "diff", "--no-renames", base, head, "--", m.path)
    data = {
        **res.data,
        "base_commit": base,
        "patch": patch,
        "test_patch": "",
        "problem_statement": bug_statement(
            res.data["FAIL_TO_PASS"], res.data.get("failure_lines") or []
        ),
    }
    return Record(rec.id, data)


def bug_statement(f2p: list[str], errors: list[str]) -> str:
    """An issue text generated from the failing tests (names and assertion messages)."""
    shown = "\n".join(f"- {t}" for t in f2p[:8]) + ("\n- ..." if len(f2p) > 8 else "")
    errs = "\n".join(f"    {e}" for e in errors[:8])
    return (
        "Some behaviour of the library regressed: the following tests now fail.\n\n"
        f"{shown}\n\n"
        + (f"The failures report:\n\n{errs}\n\n" if errs else "")
        + "Find the cause in the library code and fix it so these tests pass again, "
        "without changing the tests."
    )


def synthesize_bugs(
    repo: str | Path, out_dir: str | Path, cfg: SWESynthConfig
) -> tuple[list[Record], Path]:
    """Route 2: synthetic bugs in `repo`'s HEAD -> instances (repo_path = our clone)."""
    top = G.check_repo(repo)
    clone = G.clone(top, Path(out_dir).resolve() / "repo.git")
    seeds = [Record(f"{_repo_name(top)}", {})]

    def expand(_: Record) -> list[Record]:
        return bug_seeds(top, clone, cfg)

    steps = [
        Step("mutants", expand, on_error="raise"),
        Step("validate", lambda r: _validate_bug(r, cfg), workers=cfg.workers),
        Step("statement", lambda r: _statement(r, cfg), workers=cfg.workers),
    ]
    out = Pipeline(steps, out_dir, workers=cfg.workers, name="swe-bugs").run(seeds)
    return out, write_instances(out, Path(out_dir) / "instances.jsonl")
