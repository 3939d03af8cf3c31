"""Do arcforge's `bfcl:` verdicts match a real `bfcl evaluate` run on the result files it wrote?

For each BFCL category (and mode), arcforge runs the suite on a seeded draw with a scripted
responder that, item by item (seeded), gives BFCL's own possible answer or a broken copy of it
(a wrong value, a missing required argument, a wrong function name, no call, a call to the first
function with no arguments), so the verdicts are mixed. The suite writes BFCL's result files;
then bfcl-eval's own CLI, in its own virtualenv, scores them
(`bfcl evaluate --model <registry name> --test-category ... --partial-eval`), and the per-item
verdicts in its score files are compared with arcforge's. No model is involved: the responders
are the test's (tests/eval/test_external_bfcl.py), scripted from the benchmark's answers.

Prints a markdown table (category, mode, n, arcforge score, bfcl evaluate accuracy, items that
agree) and exits 1 on any disagreement.

Usage: python benchmarks/bfcl_agreement.py [--n 40] [--seed 0] [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "eval"))

from test_external_bfcl import (  # noqa: E402
    AnswerResponder,
    ReplayResponder,
    missing_required,
    wrong_function,
    wrong_value,
)

from arcforge.eval.external import bfcl, open_suite  # noqa: E402

FC = [
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
    "multi_turn_base",
]
PROMPT = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"]


class Mixed:
    """Per item (chosen by a seeded hash of its first message), one of several responders."""

    def __init__(self, category: str, mode: str, seed: int):
        self.seed = seed
        prompt = mode == "prompt"
        if category == "multi_turn_base":
            replay = ReplayResponder()
            self.choices = [replay, replay, bfcl.never_call, _drop_last_turn(replay)]
        elif category in ("irrelevance", "live_irrelevance"):
            self.choices = [bfcl.never_call, bfcl.first_function_empty_args]
            if prompt:
                self.choices = [bfcl.never_call, _prompt_call_first]
        elif category == "live_relevance":
            self.choices = [bfcl.never_call, bfcl.first_function_empty_args]
        else:
            alters = [None, None, wrong_value, wrong_function]
            if not prompt:
                alters.append(missing_required)
            self.choices = [AnswerResponder(category, a, prompt=prompt) for a in alters]
            self.choices.append(bfcl.never_call)
            if not prompt:
                self.choices.append(bfcl.first_function_empty_args)

    def __call__(self, messages, tools=None):
        first = next(m["content"] for m in messages if m["role"] == "user")
        pick = random.Random(f"{self.seed}:{first}").randrange(len(self.choices))
        return self.choices[pick](messages, tools)


def _drop_last_turn(replay):
    def respond(messages, tools=None):
        users = [m for m in messages if m["role"] == "user"]
        turns = replay.turns(messages)
        if len(users) == len(turns) and messages[-1]["role"] == "user":
            return bfcl.never_call(messages, tools)
        return replay(messages, tools)

    return respond


def _prompt_call_first(messages, tools=None):
    return {"role": "assistant", "content": "[some_function(x=1)]", "tool_calls": None}


def bfcl_verdicts(root: Path, registry: str, category: str) -> tuple[dict, set[str]]:
    (score,) = (root / "score" / registry.replace("/", "_")).rglob(f"BFCL_v4_{category}_score.json")
    rows = [json.loads(line) for line in score.read_text().splitlines()]
    return rows[0], {r["id"] for r in rows[1:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40, help="items per category (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="BFCL project root to write (default: a temp dir)")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="bfcl-agreement-"))
    draw = f"n={args.n}&seed={args.seed}&" if args.n else ""
    python = bfcl.find_python()
    bfcl_cli = python.parent / "bfcl"
    rows, ok = [], True
    for mode, cats in (("fc", FC), ("prompt", PROMPT)):
        ours = {}
        t0 = time.time()
        for cat in cats:
            suite = open_suite(f"bfcl:{cat}?{draw}mode={mode}&out={root / 'result'}")
            ours[cat] = suite.run(Mixed(cat, mode, args.seed), baselines=False)
        t_ours = time.time() - t0
        registry = bfcl.REGISTRY[mode]
        env = dict(os.environ, BFCL_PROJECT_ROOT=str(root), OPENAI_API_KEY="unused")
        env["KIMI_API_KEY"] = "unused"
        t0 = time.time()
        cmd = [str(bfcl_cli), "evaluate", "--model", registry, "--test-category", ",".join(cats)]
        proc = subprocess.run(
            [*cmd, "--partial-eval"], cwd=root, env=env, capture_output=True, text=True
        )
        t_bfcl = time.time() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            return 2
        print(
            f"{mode}: arcforge {t_ours:.1f} s, `{' '.join(cmd[1:])} --partial-eval` {t_bfcl:.1f} s"
        )
        for cat in cats:
            res = ours[cat]
            header, failed = bfcl_verdicts(root, registry, cat)
            agree = sum((i.score == 1.0) == (i.id not in failed) for i in res.items)
            ok &= agree == len(res.items) and header["total_count"] == len(res.items)
            rows.append((cat, mode, len(res.items), res.score, header["accuracy"], agree, header))
    print()
    print("| category | mode | n | arcforge score | bfcl evaluate accuracy | items agreeing |")
    print("|---|---|---|---|---|---|")
    for cat, mode, n, ours_s, theirs, agree, _ in rows:
        print(f"| {cat} | {mode} | {n} | {ours_s:.3f} | {theirs:.3f} | {agree}/{n} |")
    total = sum(r[2] for r in rows)
    agreeing = sum(r[5] for r in rows)
    print(f"\nper-item agreement: {agreeing}/{total}; result files and scores under {root}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
