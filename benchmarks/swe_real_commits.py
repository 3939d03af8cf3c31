"""SWE instances from real bug-fix commits, checked against a by-hand pytest run.

For each commit of a list (benchmarks/swe_real_commits.json) in repositories already cloned
under --root (this script does not fetch):
1. `arcforge synth swe --repo DIR --commit SHA` (its own install step and sandbox);
2. for a produced instance, `arcforge env check` with the reference patch (must be 1, exit 0)
   and with no patch (must be 0, exit 1);
3. by hand, outside arcforge: a plain virtualenv per repository with the install a person
   would type (the list's `by_hand`), the repository checked out at the base commit with the
   test patch applied, then at the fix commit; pytest on the instance's test files both times.
   By-hand F2P = tests failing (or missing) before and passing after.
Prints a markdown table (repo, commit, outcome, oracle/empty, F2P agreement) and the totals.

With `--draw N --seed S --mirrors DIR[,DIR...]` the commits are drawn instead: each mirror (a
git dir, e.g. from the `fetch` tool) is cloned under --root, its candidate fixes are the newest
300 non-merge first-parent commits that change both a test file (under tests/ or test/) and a
Python file outside them, and N commits are drawn from each with random.Random(S); the list
(with the by-hand installs of BY_HAND) is written to --list and then run.

Usage: python benchmarks/swe_real_commits.py --root /tmp/swe_real [--list FILE] [--out DIR]
       [--runs 1] [--only REPO]
       python benchmarks/swe_real_commits.py --root /tmp/swe_draw --list /tmp/drawn.json
       --draw 4 --seed 62 --mirrors /work/.mirror/python-attrs+attrs/repo,...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCFORGE = [str(Path(sys.executable).parent / "arcforge")]


# what a person types to install each drawn repository for its tests (from its pyproject)
BY_HAND = {
    "attrs": ["-e", ".[tests]"],
    "click": ["-e", ".", "pytest"],
    "tomlkit": ["-e", ".", "pytest", "PyYAML"],
    "jaraco.functools": ["-e", ".[test]"],
    "anyio": ["-e", ".[test]"],
}


def draw(mirrors: list[str], n: int, seed: int, root: Path) -> dict:
    """Clone each mirror under `root` and draw `n` candidate fix commits from it."""
    import random

    spec: dict = {"about": f"drawn with random.Random({seed})", "repos": {}, "commits": []}
    for mirror in mirrors:
        name = Path(mirror).parent.name.split("+", 1)[-1]
        clone = root / name
        if not clone.exists():
            sh(["git", "clone", "-q", mirror, str(clone)])
        log = sh(
            ["git", "log", "--no-merges", "--first-parent", "-n", "300", "--format=%H"], clone
        ).stdout.split()
        cands = []
        for h in log:
            files = sh(["git", "diff-tree", "--no-commit-id", "--name-only", "-r", h], clone)
            names = files.stdout.split()
            tests = [f for f in names if f.split("/")[0] in ("tests", "test")]
            code = [f for f in names if f.endswith(".py") and f not in tests]
            if tests and code:
                cands.append(h[:10])
        spec["repos"][name] = {"url": mirror, "by_hand": BY_HAND.get(name, ["-e", "."])}
        picked = random.Random(seed).sample(cands, min(n, len(cands)))
        spec["commits"] += [{"repo": name, "commit": c} for c in picked]
    return spec


def sh(
    cmd: list[str], cwd: Path | None = None, timeout: float = 1800
) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def by_hand_env(repo: Path, pip_args: list[str], work: Path) -> tuple[Path, Path]:
    """(python, checkout): a virtualenv with the repository installed editable from its own
    checkout (under `work`), built once per repository."""
    co, venv = work / f"{repo.name}-checkout", work / f"{repo.name}-venv"
    if not co.exists():
        sh(["git", "clone", "-q", "--shared", str(repo), str(co)])
    if not (venv / "bin" / "python").exists():
        sh(["/usr/bin/python3", "-m", "venv", str(venv)])
        res = sh([str(venv / "bin" / "pip"), "install", "-q", *pip_args, "pytest"], cwd=co)
        if res.returncode:
            raise RuntimeError(f"by-hand install of {repo.name} failed: {res.stderr[-800:]}")
    return venv / "bin" / "python", co


def junit_status(path: Path) -> dict[str, str]:
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {c.tag for c in case}
        st = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        out[f"{case.get('classname')}::{case.get('name')}"] = st
    return out


def node_key(node: str) -> str:
    names = node.split("::")
    names[0] = names[0].removesuffix(".py").replace("/", ".")
    return ".".join(names[:-1]) + "::" + names[-1]


def pytest_run(python: Path, co: Path, files: list[str], tag: str, seed: int) -> dict[str, str]:
    xml = co.parent / f"{co.name}-{tag}.xml"
    xml.unlink(missing_ok=True)
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *files]
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    subprocess.run(cmd, cwd=co, capture_output=True, env=env)
    return junit_status(xml) if xml.is_file() else {}


def stable_runs(
    python: Path, co: Path, files: list[str], tag: str
) -> tuple[dict[str, str], set[str]]:
    """Two runs with different hash seeds: (statuses of the stable ids, unstable ids). An id
    seen with two statuses or in one run only (ids numbered in set order) is unstable, as
    synthesis leaves out flaky tests."""
    a, b = (pytest_run(python, co, files, f"{tag}{s}", s) for s in (0, 1))
    stable = {k: v for k, v in a.items() if b.get(k) == v}
    return stable, (set(a) | set(b)) - set(stable)


def by_hand_f2p(
    python: Path, co: Path, base: str, test_patch: str, files: list[str], fix: str
) -> set[str]:
    """Node keys failing (or absent) at base + test_patch and passing at the fix commit, in
    both runs of each state."""
    sh(["git", "checkout", "-q", "-f", base], co)
    sh(["git", "clean", "-qfd"], co)
    subprocess.run(["git", "apply", "-"], cwd=co, input=test_patch, text=True, check=True)
    before, shaky = stable_runs(python, co, files, "before")
    sh(["git", "checkout", "-q", "-f", fix], co)
    after, shaky_after = stable_runs(python, co, files, "after")
    passed = {k for k, s in after.items() if s == "passed"} - shaky - shaky_after
    return {k for k in passed if before.get(k, "missing") != "passed"}


def commit_tests(repo: Path, fix: str) -> tuple[str, str, list[str]]:
    """(base, test patch, test files) of a commit, split by path as a person would."""
    base = sh(["git", "rev-parse", f"{fix}^"], repo).stdout.strip()
    names = sh(["git", "diff", "--name-only", base, fix], repo).stdout.split()
    tests = [n for n in names if n.split("/")[0] in ("tests", "testing", "test")]
    patch = sh(["git", "diff", base, fix, "--", *tests], repo).stdout if tests else ""
    files = [t for t in tests if t.rsplit("/", 1)[-1].startswith("test_") and t.endswith(".py")]
    return base, patch, files


def check(inst_path: Path, empty: bool) -> int:
    return sh(
        [*ARCFORGE, "env", "check", *(["--empty"] if empty else []), str(inst_path)]
    ).returncode


def one(repo: Path, commit: str, by_hand: list[str], out: Path, runs: int, work: Path) -> dict:
    row = {"repo": repo.name, "commit": commit}
    dst = out / f"{repo.name}-{commit}"
    res = sh(
        [
            *ARCFORGE,
            "synth",
            "swe",
            "--repo",
            str(repo),
            "--commit",
            commit,
            "--out",
            str(dst),
            "--runs",
            str(runs),
            "--fresh",
            "--allow-empty",  # a dropped commit is a row of the table, not an error
        ]
    )
    if res.returncode:
        return {**row, "outcome": f"error: {res.stderr.strip().splitlines()[-1][:80]}"}
    lines = (dst / "instances.jsonl").read_text().splitlines()
    python, co = by_hand_env(repo, by_hand, work)
    fix = sh(["git", "rev-parse", commit], repo).stdout.strip()
    if not lines:
        drop = json.loads((dst / "drops.jsonl").read_text().splitlines()[0])
        row["outcome"] = f"dropped: {drop['reason'][:60]}"
        if drop["reason"] == "no FAIL_TO_PASS test":  # by hand must find none either
            base, patch, files = commit_tests(repo, fix)
            hand = by_hand_f2p(python, co, base, patch, files, fix) if files else set()
            row["f2p_agree"] = "yes (none)" if not hand else f"no (hand finds {len(hand)})"
        return row
    inst = json.loads(lines[0])
    f2p = set(json.loads(inst["FAIL_TO_PASS"]))
    row.update(outcome=f"instance {inst['instance_id']} (F2P {len(f2p)})")
    row.update(
        oracle=check(dst / "instances.jsonl", False), empty=check(dst / "instances.jsonl", True)
    )
    files = json.loads(inst["FAIL_TO_PASS"]) + json.loads(inst["PASS_TO_PASS"])
    files = sorted({t.split("::")[0] for t in files})
    hand = by_hand_f2p(python, co, inst["base_commit"], inst["test_patch"], files, fix)
    ours = {node_key(t) for t in f2p}
    row["f2p_agree"] = (
        "yes"
        if hand == ours
        else f"no (ours-only {len(ours - hand)}, hand-only {len(hand - ours)})"
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, required=True, help="Directory holding the clones.")
    ap.add_argument("--list", type=Path, default=HERE / "swe_real_commits.json")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "swe_real_out")
    ap.add_argument("--runs", type=int, default=1, help="Test runs per state (synth --runs).")
    ap.add_argument("--only", default="", help="Only these repositories (comma-separated).")
    ap.add_argument("--draw", type=int, default=0, help="Draw N commits per mirror.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mirrors", default="", help="Git dirs to draw from (comma-separated).")
    args = ap.parse_args()
    if args.draw:
        args.root.mkdir(parents=True, exist_ok=True)
        spec = draw(args.mirrors.split(","), args.draw, args.seed, args.root)
        args.list.write_text(json.dumps(spec, indent=1))
    spec = json.loads(args.list.read_text())
    work = args.out / "by-hand"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| repo | commit | outcome | oracle (exit) | empty (exit) | F2P = by hand |")
    print("|---|---|---|---|---|---|")
    for c in spec["commits"]:
        if args.only and c["repo"] not in args.only.split(","):
            continue
        repo = args.root / c["repo"]
        try:
            row = one(
                repo, c["commit"], spec["repos"][c["repo"]]["by_hand"], args.out, args.runs, work
            )
        except (RuntimeError, subprocess.SubprocessError) as err:
            row = {"repo": c["repo"], "commit": c["commit"], "outcome": f"error: {str(err)[:80]}"}
        rows.append(row)
        print(
            f"| {row['repo']} | {row['commit']} | {row['outcome']} | {row.get('oracle', '-')} "
            f"| {row.get('empty', '-')} | {row.get('f2p_agree', '-')} |",
            flush=True,
        )
    inst = [r for r in rows if "oracle" in r]
    ok = [r for r in inst if r["oracle"] == 0 and r["empty"] == 1]
    agree = [r for r in rows if str(r.get("f2p_agree", "")).startswith("yes")]
    judged = [r for r in rows if "f2p_agree" in r]
    print(
        f"\nresult: {len(inst)}/{len(rows)} instances, {len(ok)}/{len(inst)} oracle 1 + empty 0, "
        f"{len(agree)}/{len(judged)} F2P equal to the by-hand run"
    )
    (args.out / "table.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
