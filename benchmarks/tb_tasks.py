"""Public Terminal-Bench 1 / 2 (Harbor) tasks, unmodified, through `arcforge env check`.

For every task directory listed in a task list (benchmarks/tb_tasks.txt: one line per task,
`<source repo>@<commit> <path inside the clone>`, clones under --root), runs
`arcforge env check TASK` (the reference solution: expected exit 0, reward 1) and
`arcforge env check TASK --empty` (no solution: expected exit 1, reward 0). A task is handled
correctly when both come out as expected, or when both refuse it (exit 3) naming its blockers;
anything else (a wrong verdict, a crash, a refusal of one run only) is wrong. Prints a table
(markdown) and the fraction handled correctly; `--json` also writes the rows.

With `--sample N --seed S` the tasks are instead drawn at random (Python's random.Random(S))
from a fetched Terminal-Bench 2.0 copy (`--tb2 GIT_DIR:PATH`, default the `fetch` mirror of
yujianll/skill-usage, terminal-bench-2/) and `--tb1-sample M` more from a Terminal-Bench 1
format copy (`--tb1 GIT_DIR:PATH`). Task directories are extracted with `git archive`; image
builds are cached (shared by every task with the same Dockerfile and base); every finished
task is appended to `--state` (JSON lines), so an interrupted sample resumes where it stopped.
A refusal counts as such only when every blocker it names is one Docker itself could not get
past here (arcforge.envs.blockers.BLOCKER_CLASSES); any other refusal is wrong.

Usage: python benchmarks/tb_tasks.py [--list benchmarks/tb_tasks.txt] [--root /tmp/tb]
                                    [--only SUBSTR] [--timeout S] [--json out.json]
       python benchmarks/tb_tasks.py --sample 40 --seed 1 [--tb1-sample 20]
                                    [--state /tmp/tb-sample/state.jsonl] [--no-run]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from arcforge.envs.blockers import blocker_class

HERE = Path(__file__).resolve().parent
ARCFORGE = [sys.executable, "-m", "arcforge.cli"]


def read_list(path: Path) -> list[tuple[str, str]]:
    """(source repo@commit, task path) for every non-comment line."""
    rows = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            src, rel = line.split(None, 1)
            rows.append((src, rel.strip()))
    return rows


def check(task: Path, empty: bool, timeout: int) -> tuple[int, float, str, list[str]]:
    """(exit code, reward, error, blockers) of one `arcforge env check` run."""
    cmd = [*ARCFORGE, "env", "check", str(task), *(["--empty"] if empty else [])]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, 0.0, f"timed out after {timeout}s", []
    reward, error = 0.0, ""
    try:
        out = json.loads(res.stdout)
        reward = float(out.get("reward", 0.0))
        error = str(out["details"].get("error", ""))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        error = (res.stderr.strip().splitlines() or ["no output"])[-1][:200]
    blockers = [ln[2:] for ln in res.stderr.splitlines() if ln.startswith("- ")]
    return res.returncode, reward, error, blockers


def verdict(oracle: int, empty: int, blockers: list[str]) -> str:
    if oracle == 0 and empty == 1:
        return "correct"
    if oracle == 3 and blockers:  # (a blocker the oracle's run met leaves the empty run be)
        if all(blocker_class(b) for b in blockers) and empty in (1, 3):
            return "refused"
        return "wrong"  # refused for a reason Docker would have got past
    return "wrong"


TB2_DEFAULT = "/work/.mirror/yujianll+skill-usage/repo:terminal-bench-2"
TB1_DEFAULT = "/work/.mirror/rese1f+terminal-bench-datasets/repo:datasets"


def git_tasks(spec: str, marker: str) -> tuple[Path, str, list[str]]:
    """(git dir, commit, task paths) of every directory under spec's PATH holding `marker`."""
    gitdir, _, path = spec.partition(":")
    commit = subprocess.run(
        ["git", "--git-dir", gitdir, "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    names = subprocess.run(
        ["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", "HEAD", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    tasks = sorted({n.rsplit("/", 1)[0] for n in names if n.endswith("/" + marker)})
    return Path(gitdir), commit, tasks


def extract(gitdir: Path, commit: str, task: str, root: Path) -> Path:
    """The task directory, extracted blob by blob under `root` (reused when present). Blobs the
    fetched copy lacks (its largest files may be absent) are listed in <task>/.missing."""
    dest = root / task
    if (dest / ".extracted").is_file():
        return dest
    git = ["git", "--git-dir", str(gitdir)]
    listing = subprocess.run(
        [*git, "ls-tree", "-r", "-z", commit, task], capture_output=True, check=True
    ).stdout.split(b"\0")
    missing = []
    for entry in filter(None, listing):
        meta, _, name = entry.decode().partition("\t")
        mode, kind, sha = meta.split()
        if kind != "blob":
            continue
        out = root / name
        out.parent.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([*git, "cat-file", "blob", sha], capture_output=True)
        if res.returncode != 0:
            missing.append(name[len(task) + 1 :])
            continue
        if mode == "120000":
            out.unlink(missing_ok=True)
            out.symlink_to(res.stdout.decode())
            continue
        out.write_bytes(res.stdout)
        if mode == "100755":
            out.chmod(0o755)
    if missing:
        (dest / ".missing").write_text("\n".join(missing) + "\n")
    (dest / ".extracted").write_text(commit)
    return dest


def draw(args: argparse.Namespace) -> list[tuple[str, Path, str]]:
    """(source, task dir, format) of the random sample, TB2 first, then TB1."""
    out = []
    for spec, marker, n, fmt in (
        (args.tb2, "task.toml", args.sample, "TB2"),
        (args.tb1, "task.yaml", args.tb1_sample, "TB1"),
    ):
        if n <= 0:
            continue
        gitdir, commit, tasks = git_tasks(spec, marker)
        picked = random.Random(args.seed).sample(tasks, min(n, len(tasks)))
        for task in picked:
            src = f"{gitdir.parent.name}@{commit[:12]}"
            out.append((src, extract(gitdir, commit, task, args.root), fmt))
    return out


def run_sample(args: argparse.Namespace) -> list[dict]:
    args.state.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.state.is_file():
        for line in args.state.read_text().splitlines():
            row = json.loads(line)
            done[row["task"]] = row
    rows = []
    for src, task, fmt in draw(args):
        rel = str(task.relative_to(args.root))
        if rel in done:  # its verdict recomputed under today's blocker classes
            row = done[rel]
            raw = [b.split(": ", 1)[-1] for b in row.get("blockers") or []]
            row["blockers"] = [f"{blocker_class(b) or 'UNCLASSED'}: {b}" for b in raw]
            row["verdict"] = verdict(row["oracle"][0], row["empty"][0], raw)
            rows.append(row)
            continue
        if args.no_run:
            continue
        start = time.monotonic()
        if (task / ".missing").is_file():  # the fetched copy lacks files: nobody could build it
            names = ", ".join((task / ".missing").read_text().split())
            bl = [f"missing large file(s) absent from the fetched copy: {names[:200]}"]
            o_rc, o_rw, o_err, o_bl = 3, 0.0, "", bl
            e_rc, e_rw, e_err = 3, 0.0, ""
        else:
            o_rc, o_rw, o_err, o_bl = check(task, False, args.timeout)
            e_rc, e_rw, e_err, e_bl = check(task, True, args.timeout)
        row = {
            "source": src,
            "task": rel,
            "format": fmt,
            "oracle": [o_rc, o_rw],
            "empty": [e_rc, e_rw],
            "verdict": verdict(o_rc, e_rc, o_bl),
            "seconds": round(time.monotonic() - start, 1),
            "blockers": [f"{blocker_class(b) or 'UNCLASSED'}: {b}" for b in o_bl],
            "notes": "; ".join(o_bl) or o_err or e_err,
        }
        with args.state.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", type=Path, default=HERE / "tb_tasks.txt")
    ap.add_argument("--root", type=Path, default=Path("/tmp/tb"), help="where the clones are")
    ap.add_argument("--only", default="", help="run only tasks whose path contains this")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per env check run")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--sample", type=int, default=0, help="draw N TB2 tasks at random")
    ap.add_argument("--tb1-sample", type=int, default=0, help="and M TB1-format tasks")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tb2", default=TB2_DEFAULT, help="GIT_DIR:PATH of a TB2 copy")
    ap.add_argument("--tb1", default=TB1_DEFAULT, help="GIT_DIR:PATH of a TB1-format copy")
    ap.add_argument("--state", type=Path, default=Path("/tmp/tb-sample/state.jsonl"))
    ap.add_argument(
        "--no-run", action="store_true", help="only tabulate the sample's finished tasks"
    )
    args = ap.parse_args()
    if args.sample or args.tb1_sample:
        if args.root == Path("/tmp/tb"):
            args.root = args.state.parent / "tasks"
        rows = run_sample(args)
        print_table(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    rows = []
    print(
        "| task | format | oracle (exit, reward) | empty (exit, reward) | verdict | s | blockers |"
    )
    print("|---|---|---|---|---|---|---|")
    for src, rel in read_list(args.list):
        if args.only not in rel:
            continue
        task = args.root / rel
        fmt = "TB2/Harbor" if (task / "task.toml").is_file() else "TB1"
        start = time.monotonic()
        o_rc, o_rw, o_err, o_bl = check(task, False, args.timeout)
        e_rc, e_rw, e_err, e_bl = check(task, True, args.timeout)
        v = verdict(o_rc, e_rc, o_bl)
        notes = "; ".join(o_bl) or o_err or e_err
        row = {
            "source": src,
            "task": rel,
            "format": fmt,
            "oracle": [o_rc, o_rw],
            "empty": [e_rc, e_rw],
            "verdict": v,
            "seconds": round(time.monotonic() - start, 1),
            "notes": notes,
        }
        rows.append(row)
        short = notes.replace("|", "/")[:160]
        print(
            f"| {rel.split('/', 1)[-1]} | {fmt} | {o_rc}, {o_rw:g} | {e_rc}, {e_rw:g} | {v} | "
            f"{row['seconds']:.0f} | {short} |",
            flush=True,
        )
    ok = sum(r["verdict"] != "wrong" for r in rows)
    n_correct = sum(r["verdict"] == "correct" for r in rows)
    n_refused = sum(r["verdict"] == "refused" for r in rows)
    print(
        f"\nhandled correctly: {ok}/{len(rows)} = {ok / max(len(rows), 1):.2f} "
        f"({n_correct} oracle 1 / empty 0, {n_refused} refused with their blockers)"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def print_table(rows: list[dict]) -> None:
    """The sample's markdown table and its summary (correct among the unblocked tasks)."""
    print("| task | format | oracle (exit, reward) | empty (exit, reward) | verdict | s | notes |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        notes = ("; ".join(r.get("blockers") or []) or r["notes"]).replace("|", "/")[:160]
        print(
            f"| {r['task'].rsplit('/', 1)[-1]} | {r['format']} | {r['oracle'][0]}, "
            f"{r['oracle'][1]:g} | {r['empty'][0]}, {r['empty'][1]:g} | {r['verdict']} | "
            f"{r['seconds']:.0f} | {notes} |"
        )
    for fmt in sorted({r["format"] for r in rows}):
        sub = [r for r in rows if r["format"] == fmt]
        n = {v: sum(r["verdict"] == v for r in sub) for v in ("correct", "refused", "wrong")}
        unblocked = len(sub) - n["refused"]
        print(
            f"\n{fmt}: {len(sub)} tasks: {n['correct']} correct, {n['refused']} refused with a "
            f"named blocker, {n['wrong']} wrong; correct among unblocked: {n['correct']}/"
            f"{unblocked} = {n['correct'] / max(unblocked, 1):.2f}"
        )


if __name__ == "__main__":
    main()
