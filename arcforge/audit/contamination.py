"""Contamination check: do held-out references or prompts appear in what training reads?

Per exported suite (arcforge.audit.export), over the test items the eval scores:
- `contaminated`: items whose reference solution has at least half of its 13-token windows in
  the training text (`training_texts`, every source every stage reads). The solution is the
  text a model writes (`solution`: a code body, an SWE fixed body) where the item has one, else
  its `reference`. A reference shorter than 13 tokens counts when its whole token sequence
  occurs contiguously in some training text: an exact substring check on token boundaries, so
  "42" is not found inside "1420".
- `dup_train_test`: test prompts that are also a train prompt of the suite (exact string).
- `dup_in_training`: test prompts that occur whole in some training text (exact substring).
Tokens come from a plain regex (`\\w+` runs and single punctuation marks), not the model's BPE:
the check must not depend on a trained tokenizer, and word-level windows are what n-gram
decontamination reports use. Windows are 64-bit polynomial hashes of token ids, computed with
numpy over all training text at once (a separator id keeps windows inside one text), so the
demo world's ~10 MB of training text is checked in seconds; a hash collision can only add a
false hit, with odds near 2^-40 per window here.

Some suites' references are expected in training text by design: `EXPECTED` gives the reason,
and the report prints it next to the figure; those suites are judged by their prompt duplicates.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

WINDOW = 13
THRESHOLD = 0.5  # share of a reference's windows that makes it contaminated (inclusive)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier of the rolling hash
SEP = 0  # token id between texts; windows containing it are dropped

EXPECTED = {
    "reasoning": "answers are small integers that occur throughout the math corpus; judged by "
    "prompt duplicates (a held-out problem's question never is in training text)",
    "tir": "the reasoning suite's problems posed for a python tool: integer answers occur "
    "throughout the math corpus; judged by prompt duplicates",
    "tool": "answers are knowledge-base facts that the corpus pages state on purpose (the suite "
    "measures finding them with tools); judged by prompt duplicates",
    "search": "answers are knowledge-base facts that the corpus pages state on purpose (the "
    "suite measures finding them by search); judged by prompt duplicates",
    "long_context": "answers are knowledge-base facts the corpus pages state; the suite measures "
    "retrieving one from a long context; judged by prompt duplicates",
    "terminal": "references are short shell commands of a few task families; a held-out task "
    "holds out its instruction and slot values (directories, files, keywords), not its family's "
    "command shape, so windows of that shape recur; judged by prompt duplicates",
}


def tokenize(text: str) -> list[str]:
    """Word runs and single punctuation marks (the check's tokenizer, see the header)."""
    return _TOKEN.findall(text)


def _member(h: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(len(h),) bool: which hashes are in the sorted array `table` (binary search: np.isin
    would sort the whole table again on every call)."""
    if len(table) == 0:
        return np.zeros(len(h), dtype=bool)
    idx = np.minimum(np.searchsorted(table, h), len(table) - 1)
    return table[idx] == h


def _hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """(len(ids) - n + 1,) rolling hashes of every n-token window; windows over SEP dropped."""
    if len(ids) < n:
        return np.zeros(0, dtype=np.uint64)
    m = len(ids) - n + 1
    h = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):  # wrap-around is the point of the hash
        for k in range(n):
            h = h * _BASE + ids[k : k + m]
    seps = np.concatenate([[0], np.cumsum(ids == SEP)])
    return h[(seps[n:] - seps[:m]) == 0]


class TrainingIndex:
    """Token windows of all training text, plus the joined text for exact prompt checks."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.vocab: dict[str, int] = {}
        ids: list[int] = []
        joined: list[str] = []
        for t in texts:
            ids += [self._id(tok) for tok in tokenize(t)]
            ids.append(SEP)
            joined.append(t)
        self.ids = np.asarray(ids, dtype=np.uint64)  # (N,)
        self.text = "\x00".join(joined)
        self._windows: dict[int, np.ndarray] = {}

    def _id(self, tok: str) -> int:
        i = self.vocab.get(tok)
        if i is None:
            i = self.vocab[tok] = len(self.vocab) + 1  # 0 is SEP
        return i

    def encode(self, text: str) -> np.ndarray:
        """Token ids of `text`; a token training never has gets a fresh id (it matches nothing)."""
        return np.asarray([self._id(t) for t in tokenize(text)], dtype=np.uint64)

    def windows(self, n: int) -> np.ndarray:
        """Sorted distinct hashes of every n-token window of the training text (cached)."""
        if n not in self._windows:
            self._windows[n] = np.unique(_hashes(self.ids, n))
        return self._windows[n]

    def window_share(self, text: str) -> tuple[float, int]:
        """(share of `text`'s 13-token windows found in training text, number of windows);
        a text under 13 tokens: (1.0 if its whole token sequence occurs, else 0.0, 0)."""
        ids = self.encode(text)
        if len(ids) == 0:
            return 0.0, 0
        n = min(WINDOW, len(ids))
        h = _hashes(ids, n)
        hit = _member(h, self.windows(n))
        return float(hit.mean()), (len(h) if n == WINDOW else 0)

    def contains(self, text: str) -> bool:
        """Whether `text` occurs whole (exact substring) in some training text."""
        ids = self.encode(text)
        if len(ids) >= WINDOW and not _member(_hashes(ids, WINDOW), self.windows(WINDOW)).all():
            return False  # a cheap no: some window is nowhere in training text
        return bool(text) and text in self.text


def contaminated(index: TrainingIndex, reference: str) -> bool:
    """At least half of the reference's 13-token windows (or its whole short sequence) occur."""
    share, _ = index.window_share(reference)
    return share >= THRESHOLD


def suite_contamination(
    index: TrainingIndex, suite: str, train: list[dict], test: list[dict]
) -> dict[str, Any]:
    """One suite's figures over exported items (dicts with id, prompt, reference[, solution]);
    `ids` lists the flagged items."""
    train_prompts = {r["prompt"] for r in train}
    hits, dup_tt, dup_text = [], [], []
    for r in test:
        ref = r.get("solution") or r["reference"]
        if ref and contaminated(index, ref):
            hits.append(r["id"])
        if r["prompt"] in train_prompts:
            dup_tt.append(r["id"])
        if index.contains(r["prompt"]):
            dup_text.append(r["id"])
    n = len(test)
    return {
        "suite": suite,
        "n": n,
        "contaminated": len(hits),
        "share": len(hits) / n if n else 0.0,
        "dup_train_test": len(dup_tt),
        "dup_in_training": len(dup_text),
        "expected": EXPECTED.get(suite),
        "ids": {"contaminated": hits, "dup_train_test": dup_tt, "dup_in_training": dup_text},
    }


def check_world(
    world: Any,
    stages: list[Any],
    run_dir: Path | None = None,
    counts: dict[str, int] | None = None,
    external: list[str] | None = None,
) -> dict[str, Any]:
    """The contamination figures of every exported suite for a world and the stages that train
    on it (`counts`: the test items the eval scores per suite), and of the `external` benchmark
    suites (`bfcl:simple_python?n=100&seed=1`, ...) on the items they score."""
    from arcforge.audit.export import suite_items, training_texts

    t0 = time.time()
    sources = training_texts(world, stages, run_dir)
    index = TrainingIndex(t for tt in sources.values() for t in tt.texts)
    suites = {
        s: suite_contamination(index, s, sp["train"], sp["test"])
        for s, sp in suite_items(world, counts).items()
    }
    for name in external or []:
        suites[name] = external_contamination(index, name)
    return {
        "window": WINDOW,
        "threshold": THRESHOLD,
        "suites": suites,
        "training_sources": {
            k: {"texts": len(v.texts), "stages": v.stages, "missing": v.missing}
            for k, v in sources.items()
        },
        "training_tokens": int(len(index.ids)),
        "seconds": round(time.time() - t0, 2),
    }


def external_contamination(index: TrainingIndex, name: str) -> dict[str, Any]:
    """An external suite's figures over the items it scores (`contamination_items` of the
    suite: the prompt a model reads, and its reference answer), plus `names_in_training`: items
    whose function names (BFCL) all occur, as whole token sequences, in training text. A suite that cannot
    list its items (its package missing) is reported as unchecked, with the reason."""
    from arcforge.eval.external import open_suite

    try:
        suite = open_suite(name)
        items = suite.contamination_items()
    except Exception as e:  # noqa: BLE001  (a missing package is a report line, not a crash)
        return {"suite": name, "n": 0, "unchecked": f"{type(e).__name__}: {e}"[:300]}
    res = suite_contamination(index, name, [], items)
    names_hit = [
        r["id"]
        for r in items
        if r.get("names") and all(index.window_share(n)[0] == 1.0 for n in r["names"])
    ]
    res["names_in_training"] = len(names_hit)
    res["ids"]["names_in_training"] = names_hit
    return res


def eval_counts(eval_cfg: Any) -> dict[str, int]:
    """Per exported suite, the most test items any configured eval suite of it scores."""
    from arcforge.audit.export import EVAL_TO_SUITE

    out: dict[str, int] = {}
    for name in eval_cfg.suites:
        s = EVAL_TO_SUITE.get(name)
        if s is not None:
            out[s] = max(out.get(s, 0), eval_cfg.n_for(name))
    return out


def external_suites(eval_cfg: Any) -> list[str]:
    """The configured eval suites that are external benchmarks (`prefix:arg`)."""
    return [s for s in eval_cfg.suites if ":" in s]


def cached_run_check(
    run_dir: Path, name: str, refresh: bool, compute: Callable[[Any, Any], dict[str, Any]]
) -> dict[str, Any] | None:
    """RUN_DIR/checks/<name>.json: `compute(world, cfg)` on the run's saved world and config,
    written once and read back after (`refresh`: compute again); None when the run has no saved
    world yet."""
    from arcforge.run_config import load_config
    from arcforge.world import World

    path = run_dir / "checks" / f"{name}.json"
    if path.exists() and not refresh:
        return json.loads(path.read_text())
    if not (run_dir / "world" / "DONE").exists():
        return None
    result = compute(World.load(run_dir / "world"), load_config(run_dir / "config.yaml"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def run_contamination(run_dir: Path, refresh: bool = False) -> dict[str, Any] | None:
    """RUN_DIR/checks/contamination.json, computed once per run from its saved world and config
    (None when the run has no saved world yet)."""
    return cached_run_check(
        run_dir,
        "contamination",
        refresh,
        lambda world, cfg: check_world(
            world, cfg.stages, run_dir, eval_counts(cfg.eval), external_suites(cfg.eval)
        ),
    )


def format_table(res: dict[str, Any]) -> str:
    """A plain-text table of the figures, with the by-design reasons under it."""
    lines = [
        f"{'suite':<13} {'n':>4} {'contaminated':>13} {'dup train/test':>15} "
        f"{'dup in training':>16}"
    ]
    for s, r in res["suites"].items():
        mark = " *" if r["expected"] else ""
        lines.append(
            f"{s:<13} {r['n']:>4} {r['share']:>12.2f}{mark:<2}"
            f"{r['dup_train_test']:>14} {r['dup_in_training']:>16}"
        )
    reasons = [f"* {s}: {r['expected']}" for s, r in res["suites"].items() if r["expected"]]
    return "\n".join(lines + reasons)
