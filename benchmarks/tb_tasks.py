"""Public Terminal-Bench 1 / 2 (Harbor) tasks, unmodified, through `arcforge env check`.

For every task directory listed in a task list (benchmarks/tb_tasks.txt: one line per task,
`<source repo>@<commit> <path inside the clone>`, clones under --root), runs
`arcforge env check TASK` (the reference solution: expected exit 0, reward 1) and
`arcforge env check TASK --empty` (no solution: expected exit 1, reward 0). A task is handled
correctly when both come out as expected, or when both refuse it (exit 3) naming its blockers;
anything else (a wrong verdict, a crash, a refusal of one run only) is wrong. Prints a table
(markdown) and the fraction handled correctly; `--json` also writes the rows.

Usage: python benchmarks/tb_tasks.py [--list benchmarks/tb_tasks.txt] [--root /tmp/tb]
                                    [--only SUBSTR] [--timeout S] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

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
    if oracle == 3 and empty == 3 and blockers:
        return "refused"
    return "wrong"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", type=Path, default=HERE / "tb_tasks.txt")
    ap.add_argument("--root", type=Path, default=Path("/tmp/tb"), help="where the clones are")
    ap.add_argument("--only", default="", help="run only tasks whose path contains this")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per env check run")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
