"""SWE task synthesis: executable bug-fix instances from a local git repository.

Two routes, both ending in instances in SWE-bench's schema (swe_meta: `repo` as owner/name,
a real `version`, FAIL_TO_PASS / PASS_TO_PASS as JSON-encoded lists, `environment_setup_commit`,
the harness fields of swebench 5) plus `repo_path` and `install`, which SWEEnv / `env check`
use to grade them:

1. Issue-PR: one fix commit (`commits=[sha]`, base = its first parent), every commit of a
   range, fix commits that change both code and tests among the newest ones
   (swe_git.fix_commits), or SWE-bench style records given as JSONL (base_commit / patch /
   test_patch). A packaged repository gets an environment per `environment_setup_commit`
   (the newest base commit of the candidates sharing a version, as SWE-bench groups them;
   swe_venv: `pip install -e .[test extras]`, test requirements, or the user's command). A
   test patch that changes only shared helpers runs the test files that use them
   (swe_meta.helper_test_files); dropped candidates keep pytest's output in drops.jsonl.
   The diff is split by path into the code `patch` and the `test_patch`; the test files run in the
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

import dataclasses
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcforge.envs.swe_venv import (
    EnvBuildError,
    InstallSpec,
    RepoEnv,
    ensure_env,
    env_summary,
    needs_install,
)
from arcforge.llm import LLMClient, LLMError
from arcforge.synth import swe_git as G
from arcforge.synth import swe_meta as M
from arcforge.synth.pipeline import Drop, Pipeline, Record, Step, parse_jsonl
from arcforge.synth.swe_bugs import apply_mutation, find_mutations, pick_mutations
from arcforge.synth.swe_meta import clear_outputs, write_drops, write_instances
from arcforge.synth.swe_validate import classify, collect, failure_lines, run_state

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
    commits: explicit candidate commits (one fix commit, or every commit of a range);
        None scans the newest `max_commits`.
    install: how environments are installed (swe_venv.InstallSpec).
    repo_name: `owner/name` (None: from the git remote).
    retry_failed_installs: install again where a cached install failed (set by `fresh`).
    """

    runs: int = 3
    backend: str = "bwrap"
    timeout: float = 300
    workers: int = 2
    llm: LLMClient | None = None
    max_commits: int = 200
    max_bugs: int = 20
    seed: int = 0
    commits: list[str] | None = None
    install: InstallSpec = field(default_factory=InstallSpec)
    repo_name: str | None = None
    retry_failed_installs: bool = False


def _repo_name(repo: Path) -> str:
    return re.sub(r"[^\w.-]", "_", repo.resolve().name)


def commit_seeds(repo: Path, cfg: SWESynthConfig) -> list[Record]:
    """One record per candidate commit: `cfg.commits`, else the fix commits (code + tests) among
    the newest `cfg.max_commits`. Ids are SWE-bench's `owner__name-N`."""
    slug = M.repo_slug(repo, cfg.repo_name)
    if cfg.commits is not None:
        cands = [G.commit_info(repo, sha) for sha in cfg.commits]
    else:
        cands = G.fix_commits(repo, max_count=cfg.max_commits)
    prs = [M.pr_number(fc.message) for fc in cands]
    version = {fc.base: M.package_version(repo, fc.base) for fc in cands}
    setup = {version[fc.base]: fc.base for fc in cands}  # oldest first: the newest base wins
    out = []
    for fc, pr in zip(cands, prs, strict=True):
        n = pr if pr and prs.count(pr) == 1 else fc.sha[:12]
        patch, tpatch = G.split_diff(repo, fc.base, fc.sha)
        out.append(
            Record(
                M.instance_id(slug, n),
                {
                    "repo": slug,
                    "repo_path": str(repo.resolve()),
                    "base_commit": fc.base,
                    "patch": patch,
                    "test_patch": tpatch,
                    "problem_statement": fc.message,
                    "hints_text": "",
                    "created_at": fc.date,
                    "version": version[fc.base],
                    "environment_setup_commit": setup[version[fc.base]],
                    "install": cfg.install.to_dict(),
                    "route": "commit",
                    "commit": fc.sha,
                },
            )
        )
    return out


def _swe_bench_record(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"got {type(value).__name__}")
    missing = [k for k in ("instance_id", "base_commit", "patch", "test_patch") if k not in value]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    return value


def record_seeds(jsonl: Path, repo: Path) -> list[Record]:
    """SWE-bench style records (base_commit, patch, test_patch, ...) against `repo`."""
    out = []
    for rec in parse_jsonl(jsonl, _swe_bench_record, "not a SWE-bench record"):
        data = {
            **rec,
            "repo": rec.get("repo") or M.repo_slug(repo),
            "repo_path": str(repo.resolve()),
            "version": rec.get("version") or M.package_version(repo, rec["base_commit"]),
            "environment_setup_commit": rec.get("environment_setup_commit") or rec["base_commit"],
            "install": rec.get("install") or InstallSpec().to_dict(),
            "route": "record",
            "problem_statement": rec.get("problem_statement") or "",
        }
        out.append(Record(str(rec["instance_id"]), data))
    return out


def _env(d: dict[str, Any], tree: Path, retry: bool = False) -> RepoEnv | None:
    """The environment a candidate's tests run under (None: the host's pytest), or Drop.
    `retry`: install again where an earlier install failed (a --fresh run)."""
    spec = InstallSpec.from_dict(d.get("install"))
    if not needs_install(tree, spec):
        return None
    try:
        return ensure_env(d["repo_path"], d["environment_setup_commit"], spec, retry=retry)
    except EnvBuildError as err:
        raise Drop(f"install failed: {err}", err.log[-8000:]) from None


def _validate(rec: Record, cfg: SWESynthConfig) -> Record:
    """Build the three states, run the tests, keep the instance when it has F2P tests."""
    d = rec.data
    changed = [f for f in G.patch_files(d["test_patch"]) if f.endswith(".py")]
    if not changed:
        raise Drop("no test files in test_patch")
    if not d["patch"].strip():
        raise Drop("no code change besides the tests")
    tmp = Path(tempfile.mkdtemp(prefix="arcforge-swe-synth-"))
    try:
        base = G.export_tree(d["repo_path"], d["base_commit"], tmp / "base")
        before = shutil.copytree(base, tmp / "before", symlinks=True)
        if err := G.apply_patch(before, d["test_patch"]):
            raise Drop("test_patch does not apply", err)
        after = shutil.copytree(before, tmp / "after", symlinks=True)
        if err := G.apply_patch(after, d["patch"]):
            raise Drop("patch does not apply", err)
        tests = M.helper_test_files(after, changed)
        if not tests:
            raise Drop("no test file uses the changed test helpers", ", ".join(changed))
        env = _env(d, base, cfg.retry_failed_installs)
        out = _run_states(rec, tests, after, before, base, cfg, env)
        return Record(out.id, {**out.data, "test_files": tests, "env": env_summary(env)})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_states(
    rec: Record,
    tests: list[str],
    after: Path,
    before: Path,
    base: Path | None,
    cfg: SWESynthConfig,
    env: RepoEnv | None = None,
) -> Record:
    ids, output = collect(after, tests, cfg.backend, cfg.timeout, env)
    if not ids:
        raise Drop("no tests collected after the fix", output)
    a = run_state(after, tests, ids, cfg.runs, cfg.backend, cfg.timeout, env)
    b = run_state(before, tests, ids, cfg.runs, cfg.backend, cfg.timeout, env)
    z = run_state(base, tests, ids, cfg.runs, cfg.backend, cfg.timeout, env) if base else None
    c = classify(ids, a, b, z)
    if not c.f2p:
        why = f"{len(ids)} collected, {len(c.flaky)} flaky"
        if not any(a.always(i, "passed") for i in ids):
            why += "\nno collected test passes with the fix"
        raise Drop(
            "no FAIL_TO_PASS test",
            f"{why}\n--- with the fix:\n{a.output}\n--- without it:\n{b.output}",
        )
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


def synthesize_from_repo(
    repo: str | Path,
    out_dir: str | Path,
    cfg: SWESynthConfig,
    records: str | Path | None = None,
    fresh: bool = False,
) -> tuple[list[Record], Path]:
    """Route 1: fix commits of `repo` (or the SWE-bench records in `records`) -> instances.

    `fresh` deletes an earlier run's journals first; otherwise candidates already decided in
    `out_dir` are resumed (summary.json counts them). Returns the validated records and the
    path of instances.jsonl (summary.json and drops.jsonl beside it)."""
    top = G.check_repo(repo)
    if fresh:
        clear_outputs(Path(out_dir))
        cfg = dataclasses.replace(cfg, retry_failed_installs=True)
    seeds = record_seeds(Path(records), top) if records else commit_seeds(top, cfg)
    steps = [
        Step("validate", lambda r: _validate(r, cfg), workers=cfg.workers),
        Step("statement", lambda r: _statement(r, cfg), workers=cfg.workers),
    ]
    out = Pipeline(steps, out_dir, workers=cfg.workers, name="swe").run(seeds)
    write_drops(Path(out_dir))
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
                "repo": M.repo_slug(repo),
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
