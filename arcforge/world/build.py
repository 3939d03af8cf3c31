"""`build_world`: generate every part of the world from one config, deterministically.

Order matters only within a component; each component has its own named rng. Math problems are
drawn once as one pool of distinct questions and cut into corpus / held-out corpus / train
tasks / test tasks, so held-out problems never leak into training text.
"""

from __future__ import annotations

import random

from arcforge.types import Task
from arcforge.world.code.codelib import FuncTemplate, code_space, snippet_doc
from arcforge.world.code.repos import Repo, make_repo
from arcforge.world.knowledge.kb import build_kb
from arcforge.world.knowledge.names import NameBank
from arcforge.world.knowledge.pages import Page, render_pages
from arcforge.world.tasks.mathgen import Problem, make_problems
from arcforge.world.tasks.pools import (
    chat_tasks,
    code_tasks,
    long_context_tasks,
    reasoning_tasks,
    search_tasks,
    swe_tasks,
    terminal_tasks,
    tool_tasks,
)
from arcforge.world.text.corpus import Doc, mix
from arcforge.world.text.demos import (
    MODES,
    Demo,
    chat_demo,
    code_demo,
    correction_demo,
    reasoning_demo,
    swe_demo,
    terminal_demo,
    tool_demo,
)
from arcforge.world.text.drills import copy_drills
from arcforge.world.world import World
from arcforge.world.world_config import WorldConfig, component_rng


def _code_docs(
    rng: random.Random, repos: list[Repo], target: int, prefix: str, functions: list[FuncTemplate]
) -> list[Doc]:
    """The repos' files, then standalone snippets of `functions` up to `target` chars."""
    docs = []
    for repo in repos:
        for path, src in {**repo.files, **repo.tests}.items():
            docs.append(Doc(f"{prefix}-{len(docs):06d}", f"# {repo.name}: {path}\n{src}", "code"))
    chars = sum(len(d.text) for d in docs)
    while chars < target:
        tpl = rng.choice(functions)
        text = snippet_doc(rng, tpl, rng.choice(tpl.names), rng.randint(2, 5))
        docs.append(Doc(f"{prefix}-{len(docs):06d}", text, "code"))
        chars += len(text)
    return docs


def _math_docs(problems: list[Problem], prefix: str) -> list[Doc]:
    return [Doc(f"{prefix}-{i:06d}", p.worked_text(), "math") for i, p in enumerate(problems)]


def _problems_for_chars(
    rng: random.Random, people: list[str], target: int, exclude: set[str]
) -> list[Problem]:
    out: list[Problem] = []
    seen, chars = set(exclude), 0
    while chars < target:
        batch = make_problems(rng, people, 200, seen)
        if not batch:
            break
        out += batch
        seen.update(p.question for p in batch)
        chars += sum(len(p.worked_text()) for p in batch)
    return out


def _corpora(
    cfg: WorldConfig,
    mrng: random.Random,
    pages: list[Page],
    repos: list[Repo],
    n_test_repos: int,
    task_probs: list[Problem],
    people: list[str],
    kb_names: set[str],
) -> tuple[list[Doc], list[Doc]]:
    """(pretraining mixture, held-out clean docs). Test repos and task problems stay out of both
    sides' overlap: held-out docs use held-out pages, problems and the test repos."""
    web = [
        Doc(f"web-{i:06d}", p.text, "web") for i, p in enumerate(q for q in pages if not q.heldout)
    ]
    web_chars = sum(len(d.text) for d in web)
    held_probs = make_problems(
        mrng, people, cfg.n(cfg.heldout_math), {p.question for p in task_probs}
    )
    taken = {p.question for p in task_probs + held_probs}
    corpus_probs = _problems_for_chars(mrng, people, int(web_chars * cfg.math_to_web), taken)
    crng = component_rng(cfg, "code")
    space = code_space(cfg.seed)
    code = _code_docs(
        crng, repos[n_test_repos:], int(web_chars * cfg.code_to_web), "code", space.train
    )
    drills = copy_drills(component_rng(cfg, "drills"), int(web_chars * cfg.copy_drills), kb_names)
    corpus = mix(
        component_rng(cfg, "mix"),
        web + code + _math_docs(corpus_probs, "math") + drills,
        cfg.junk_frac,
        cfg.dup_frac,
    )
    held_web = [
        Doc(f"hweb-{i:06d}", p.text, "web") for i, p in enumerate(q for q in pages if q.heldout)
    ]
    held_code = _code_docs(
        crng, repos[:n_test_repos], cfg.n(cfg.heldout_snippets) * 400, "hcode", space.test
    )
    return corpus, held_web + held_code + _math_docs(held_probs, "hmath")


def build_world(cfg: WorldConfig | None = None) -> World:
    """Generate the whole world for `cfg` (defaults: the demo sizes)."""
    cfg = cfg or WorldConfig()
    names = NameBank(component_rng(cfg, "names"))
    kb = build_kb(
        component_rng(cfg, "kb"),
        names,
        cfg.n(cfg.n_people),
        cfg.n(cfg.n_places, 3),
        cfg.n(cfg.n_orgs),
        cfg.n(cfg.n_works),
        cfg.heldout_frac,
    )
    pages = render_pages(kb, component_rng(cfg, "pages"))
    space = code_space(cfg.seed)
    n_repos = cfg.n(cfg.n_repos, 3)
    n_test_repos = min(n_repos - 1, cfg.n(cfg.n_test_repos, 1))
    repos = [
        make_repo(
            component_rng(cfg, f"repo{i}"),
            f"{names.token()}-{names.token()}",
            2 + i % 3,
            space.test if i < n_test_repos else space.train,
            "test" if i < n_test_repos else "train",
        )
        for i in range(n_repos)
    ]
    t = cfg.tasks
    n_tr, n_te = cfg.split_counts(t.reasoning)
    mrng = component_rng(cfg, "math")
    people = [e.name for e in kb.of_type("person")]
    task_probs = make_problems(mrng, people, n_tr + n_te, set())
    corpus, heldout = _corpora(
        cfg, mrng, pages, repos, n_test_repos, task_probs, people, set(kb.by_name)
    )

    tool = tool_tasks(component_rng(cfg, "tool"), kb, *cfg.split_counts(t.tool))
    pools = {
        "reasoning": reasoning_tasks(task_probs[:n_tr], task_probs[n_tr:]),
        "tool": tool,
        "chat": chat_tasks(component_rng(cfg, "chat"), kb, *cfg.split_counts(t.chat)),
        "long_context": long_context_tasks(
            kb,
            pages,
            cfg.long_context_chars,
            cfg.seed,
            *cfg.split_counts(t.long_context),
        ),
        "code": code_tasks(
            component_rng(cfg, "code_tasks"),
            space,
            *cfg.split_counts(t.code),
            NameBank(component_rng(cfg, "code_names")),
            cfg.code_fresh_names,
        ),
        "terminal": terminal_tasks(
            component_rng(cfg, "terminal"),
            NameBank(component_rng(cfg, "terminal_names")),
            *cfg.split_counts(t.terminal),
            cfg.terminal_fresh_slots,
        ),
        "swe": swe_tasks(
            component_rng(cfg, "swe"),
            repos,
            n_test_repos,
            *cfg.split_counts(t.swe),
            NameBank(component_rng(cfg, "swe_names")),
            cfg.swe_fresh_repos,
            cfg.swe_fresh_functions,
            component_rng(cfg, "swe_balance") if cfg.swe_balance else None,
        ),
        "search": search_tasks(
            component_rng(cfg, "search"),
            kb,
            pages,
            *cfg.split_counts(t.search),
            cfg.search_hops,
            {x.instruction for x in tool[0] + tool[1]},
        ),
    }
    task_pools = {s: {"train": tr, "test": te} for s, (tr, te) in pools.items()}
    world = World(cfg, kb, pages, repos, corpus, heldout, task_pools, [])
    world.demos = build_demos(world, component_rng(cfg, "demos"))
    return world


def build_demos(world: World, rng: random.Random) -> list[Demo]:
    """Scripted-expert demos from train tasks only, counts from `world.config.demos`."""
    cfg, c = world.config, world.config.demos
    tools = world.tools()
    demos: list[Demo] = []

    def pick(suite: str, n: int) -> list[Task]:
        pool = world.tasks(suite, "train")
        return rng.sample(pool, min(n, len(pool)))

    def add(
        kind: str,
        msgs,
        task: Task,
        tool_names: list[str],
        mode: str = "interleaved",
        shown: list[Task] | None = None,
    ) -> None:
        ids = [t.id for t in shown or [task]]
        demos.append(
            Demo(f"demo-{kind}-{len(demos):05d}", kind, msgs, tool_names, mode, task.id, ids)
        )

    n_think = cfg.n(c.reasoning, 1)
    math = pick("reasoning", n_think + cfg.n(c.reasoning_no_think, 1))
    for i, task in enumerate(math):
        think = i < n_think
        add(
            "reasoning",
            reasoning_demo(task, think),
            task,
            [],
            "interleaved" if think else "turn_level",
        )
    tool_pool = world.tasks("tool", "train")
    for i, task in enumerate(pick("tool", cfg.n(c.tool, 1))):
        mode = MODES[i % len(MODES)]
        pair = [task] if mode == "interleaved" else [task, rng.choice(tool_pool)]
        add("tool", tool_demo(pair, tools, mode), task, list(task.tools), mode, pair)
    lookups = [t for t in tool_pool if t.metadata["calls"][0]["name"] == "lookup"]
    for task in rng.sample(lookups, min(cfg.n(c.tool_correction, 1), len(lookups))):
        add("tool_correction", correction_demo(task, tools, rng), task, list(task.tools))
    for task in pick("chat", cfg.n(c.chat, 1)):
        add("chat", chat_demo(task), task, [])
    for task in pick("code", cfg.n(c.code, 1)):
        add("code", code_demo(task), task, [])
    for task in pick("terminal", cfg.n(c.terminal, 1)):
        add("terminal", terminal_demo(task), task, [])
    for task in pick("swe", cfg.n(c.swe, 1)):
        add("swe", swe_demo(task), task, ["view_function", "replace_function"])
    return demos
