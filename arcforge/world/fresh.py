"""Fresh and dev tasks: more of a suite's tasks, generated on demand from its own generator.

The world's train tasks are all shown in SFT (demos, expert episodes), so RL on them rewards
recall; `fresh` tasks give RL new items of the same kind, and `dev` ones (a disjoint set) let a
stage pick its checkpoint without touching `test`. Each is drawn under a seed of its own, none
with the instruction of a train or held-out task.
"""

from __future__ import annotations

from itertools import zip_longest

from arcforge.types import Task
from arcforge.world.code.codelib import code_space
from arcforge.world.code.repos import Repo
from arcforge.world.knowledge.kb import KB
from arcforge.world.knowledge.names import NameBank
from arcforge.world.knowledge.pages import Page
from arcforge.world.tasks.mathgen import make_problems
from arcforge.world.tasks.pools import (
    code_pool,
    reasoning_tasks,
    search_tasks,
    swe_tasks,
    terminal_tasks,
    tool_tasks,
)
from arcforge.world.world_config import WorldConfig, component_rng

FRESH_SUITES = ("tool", "search", "terminal", "code", "swe", "reasoning")
DEV_SIZE = 100


def _n_test_repos(cfg: WorldConfig, repos: list[Repo]) -> int:
    """How many of the world's first repos are held out (built from held-out functions)."""
    return sum(r.split == "test" for r in repos)


def _bug_key(task: Task) -> tuple[str, str, str]:
    bug = task.context["bug"]
    return task.context["repo"], bug["path"], bug["mutated"]


def _family(task: Task) -> str | None:
    """What fresh tasks take turns by: a terminal task's family, an SWE bug's function."""
    if task.kind == "swe":
        return task.context["bug"]["function"]
    return task.metadata.get("family")


def fresh_tasks(
    cfg: WorldConfig,
    kb: KB,
    pages: list[Page],
    repos: list[Repo],
    task_pools: dict[str, dict[str, list[Task]]],
    suite: str,
) -> dict[str, list[Task]]:
    """{"dev": DEV_SIZE tasks times the world's scale, "fresh": up to as many as the suite's
    train split} of `suite`, with no instruction of a train or test task, nor of each other;
    generated on demand (both from one draw), the same every time for one world.

    Args:
        cfg, kb, pages, repos, task_pools: the world's parts (`World`'s fields of those names).
        suite: one of FRESH_SUITES.
    Returns:
        {"dev": [...], "fresh": [...]}, ids `<suite>-<split>-<i>`.
    """
    if suite not in FRESH_SUITES:
        raise ValueError(
            f"suite {suite!r} has no fresh tasks; these do: {', '.join(FRESH_SUITES)}, tir"
        )
    have = {t.instruction for s in ("train", "test") for t in task_pools[suite][s]}
    have |= {t.instruction for pool in task_pools.values() for t in pool["test"]}
    n_dev, n_fresh = cfg.n(DEV_SIZE, 4), len(task_pools[suite]["train"])
    n = n_dev + n_fresh
    rng = component_rng(cfg, f"fresh:{suite}")
    if suite == "tool":
        pool, _ = tool_tasks(rng, kb, 2 * n, 0)
    elif suite == "search":
        pool, _ = search_tasks(rng, kb, pages, 2 * n, 0, cfg.search_hops)
    elif suite == "terminal":
        pool, _ = terminal_tasks(
            rng,
            NameBank(component_rng(cfg, "fresh:terminal_names")),
            2 * n,
            0,
            cfg.terminal_fresh_slots,
        )
    elif suite == "swe":  # other bugs in the train repos; never one in a held-out repo
        seen = {_bug_key(t) for t in task_pools["swe"]["train"]}
        pool, _ = swe_tasks(rng, repos, _n_test_repos(cfg, repos), 2 * n, 0)
        pool = [t for t in pool if _bug_key(t) not in seen]  # a train bug with another example
    elif suite == "code":  # train functions no train task uses first; never a held-out one
        used = {t.metadata["template"] for t in task_pools["code"]["train"]}
        train = code_space(cfg.seed).train
        funcs = [f for f in train if f.key not in used] + [f for f in train if f.key in used]
        pool = code_pool(
            rng,
            funcs[: 2 * n],
            2 * n,
            NameBank(component_rng(cfg, "fresh:code_names")),
            cfg.code_fresh_names,
        )
    else:
        people = [e.name for e in kb.of_type("person")]
        pool, _ = reasoning_tasks(make_problems(rng, people, n, set(have)), [])
    pool = [t for t in pool if t.instruction not in have]
    # distinct instructions, the families taking turns (terminal's families, SWE's buggy
    # functions: drawn as they come, a few functions take most bugs, and RL hardly ever samples
    # the fixes SFT has not taught)
    by_family: dict = {}
    for t in {t.instruction: t for t in reversed(pool)}.values():
        by_family.setdefault(_family(t), []).append(t)
    turns = [t for row in zip_longest(*by_family.values()) for t in row if t is not None]
    size = {"dev": n_dev, "fresh": n_fresh}
    out: dict[str, list[Task]] = {"dev": [], "fresh": []}
    for t in turns:  # dealt to the open split furthest behind its size: both cover every family
        open_ = [s for s in out if len(out[s]) < size[s]]
        if not open_:
            break
        out[min(open_, key=lambda s: len(out[s]) / size[s])].append(t)
    for split, tasks in out.items():
        if not tasks:
            raise ValueError(
                f"no {split} {suite} tasks could be drawn beside the train and test ones"
            )
        for i, t in enumerate(tasks):
            t.id, t.split = f"{suite}-{split}-{i:05d}", split
    return out
