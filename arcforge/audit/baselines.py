"""Trivial baselines beside every suite's score, on the same held-out items.

- majority   every test item gets the most common train reference of its suite;
- nearest    every test item gets the reference of the most similar train prompt (BM25 over
             the train prompts with bm25s, the library the search environment uses; a test
             prompt that equals a train prompt always takes that item).
Both are scored with the suite's own scorer: text answers with the functions the eval suites and
environments use (math_reward, exact_match, the search env's normalized match, the chat
constraints, the explore target); code, terminal and SWE by execution in their sandboxed
environments (CodeEnv runs the train body under the test item's stub against its hidden tests;
terminal runs the train command in the test task's workspace and its verifier; SWE applies the
train fix patch to the test repo and runs FAIL_TO_PASS + PASS_TO_PASS; a patch that edits a file
the test repo lacks cannot apply and scores 0 without a run). Execution is capped at
`max_exec` items per suite (the first ones, as the eval takes them) and the result says n.
Chains have no text answer and are not scored here. A stage's gain is read against these: a
score at the nearest-train level is what recall of the train split alone gives.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arcforge.types import Message, Task

EXECUTED = ("code", "terminal", "swe")
MAX_EXEC = (
    100  # executed items per suite and baseline: the demo's eval counts (a run costs ~0.3-1 s)
)


def nearest_indices(train_prompts: list[str], test_prompts: list[str]) -> list[int]:
    """For each test prompt the index of its nearest train prompt (exact duplicate, else BM25
    top-1; -1 when there are no train prompts)."""
    if not train_prompts:
        return [-1] * len(test_prompts)
    import bm25s

    exact = {p: i for i, p in reversed(list(enumerate(train_prompts)))}
    todo = [j for j, p in enumerate(test_prompts) if p not in exact]
    out = [exact.get(p, -1) for p in test_prompts]
    if todo:
        retriever = bm25s.BM25()
        retriever.index(
            bm25s.tokenize(train_prompts, stopwords=None, show_progress=False), show_progress=False
        )
        queries = bm25s.tokenize(
            [test_prompts[j] for j in todo], stopwords=None, show_progress=False, return_ids=False
        )
        docs, _ = retriever.retrieve(queries, k=1, show_progress=False, n_threads=1)
        for j, row in zip(todo, docs):
            out[j] = int(row[0])
    return out


def _text_scorer(suite: str) -> Callable[[str, Task], float] | None:
    """The suite's scorer of a final answer text, or None for suites scored otherwise."""
    from arcforge.envs.search_env import normalize_answer
    from arcforge.rewards.math import exact_match, math_reward
    from arcforge.world import check_constraints

    gold = lambda t: str(t.validation.answer or "")  # noqa: E731
    if suite in ("reasoning", "tir"):
        return lambda p, t: math_reward(f"Answer: {p}", gold(t))
    if suite in ("tool", "long_context"):
        return lambda p, t: exact_match(f"Answer: {p}", gold(t))
    if suite == "search":
        return lambda p, t: float(bool(p) and normalize_answer(p) == normalize_answer(gold(t)))
    if suite == "chat":
        return lambda p, t: float(check_constraints(p, t.validation.constraints)[0] >= 1.0)
    if suite == "explore":
        return lambda p, t: float(p.strip() == str(t.metadata.get("target", "")))
    return None


_PATCH_PATH = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", re.MULTILINE)


def _cannot_apply(world: Any, patch: str, task: Task) -> bool:
    """True when a world SWE patch edits a file the task's repo does not have: `git apply`
    and `patch` both refuse it, so the run is skipped (it scores 0 either way)."""
    repo = next((r for r in world.repos if r.name == task.context.get("repo")), None)
    paths = set(_PATCH_PATH.findall(patch)) - {"/dev/null"}
    if repo is None or not paths or "/dev/null" in patch:
        return False
    return not paths <= {*repo.files, *repo.tests}


def _exec_score(world: Any, suite: str, pred: str, task: Task) -> float:
    """Run `pred` (a train item's solution) on `task` in its environment; 1.0 = verified."""
    from arcforge.envs.check import check_task
    from arcforge.envs.registry import env_factory
    from arcforge.sandbox import SandboxError

    if not pred.strip() or (suite == "swe" and _cannot_apply(world, pred, task)):
        return 0.0
    try:
        if suite == "code":
            env = env_factory(world)(task)
            try:
                env.reset(task)
                env.step(Message("assistant", f"```python\n{pred}```"))
                return env.verify().score
            finally:
                env.close()
        return float(check_task(task, solution=pred, repos=world.repos)["reward"])
    except (SandboxError, ValueError, OSError):
        return 0.0


def _answer(suite: str, task: Task) -> str:
    """What a baseline copies from a train item: the text a model writes for it."""
    from arcforge.audit.export import reference_of, solution_of

    if suite == "code":
        return solution_of(task) or reference_of(task)
    return reference_of(task)


def suite_baselines(
    world: Any,
    suite: str,
    train: list[Task],
    test: list[Task],
    max_exec: int = MAX_EXEC,
    workers: int = 2,
) -> dict[str, Any] | None:
    """{"n", "majority", "nearest", "majority_answer", "executed", "solved": the ids each
    baseline solves} of one suite (None: the suite has no scorer here, or no items)."""
    scorer = _text_scorer(suite)
    executed = suite in EXECUTED
    if (scorer is None and not executed) or not test or not train:
        return None
    items = test[:max_exec] if executed else test
    if not items:
        return None
    answers = [_answer(suite, t) for t in train]
    majority = Counter(answers).most_common(1)[0][0]
    near = nearest_indices([t.instruction for t in train], [t.instruction for t in items])
    preds = [(majority, t) for t in items] + [(answers[i], t) for i, t in zip(near, items)]
    if executed:
        with ThreadPoolExecutor(workers) as pool:
            scores = list(pool.map(lambda pt: _exec_score(world, suite, *pt), preds))
    else:
        assert scorer is not None
        scores = [scorer(p, t) for p, t in preds]
    n = len(items)
    solved = {
        k: [t.id for t, x in zip(items, part) if x >= 1.0]
        for k, part in (("majority", scores[:n]), ("nearest", scores[n:]))
    }
    return {
        "n": n,
        "n_test": len(test),
        "majority": sum(scores[:n]) / n,
        "nearest": sum(scores[n:]) / n,
        "majority_answer": majority[:120],
        "executed": executed,
        "solved": solved,
    }


def world_baselines(
    world: Any,
    counts: dict[str, int] | None = None,
    max_exec: int = MAX_EXEC,
    suites: list[str] | None = None,
) -> dict[str, Any]:
    """Both baselines for every exported suite (or those in `suites`) that has a scorer
    (`counts`: test items the eval scores per suite, as in the contamination check)."""
    from arcforge.audit.export import EXPORT_SUITES, split_tasks

    t0 = time.time()
    out: dict[str, Any] = {}
    for s in EXPORT_SUITES if suites is None else [x for x in EXPORT_SUITES if x in suites]:
        t1 = time.time()
        r = suite_baselines(world, s, *split_tasks(world, s, counts), max_exec=max_exec)
        if r is not None:
            out[s] = {**r, "seconds": round(time.time() - t1, 2)}
    return {"suites": out, "max_exec": max_exec, "seconds": round(time.time() - t0, 2)}


def run_baselines(run_dir: Path, refresh: bool = False) -> dict[str, Any] | None:
    """RUN_DIR/checks/baselines.json, computed once per run from its saved world for the suites
    its eval config scores (None when the run has no saved world yet)."""
    from arcforge.audit.contamination import cached_run_check, eval_counts

    def compute(world, cfg) -> dict[str, Any]:
        counts = eval_counts(cfg.eval)  # the suites the run scores, on the items it scores
        return world_baselines(world, counts, suites=list(counts))

    return cached_run_check(run_dir, "baselines", refresh, compute)
