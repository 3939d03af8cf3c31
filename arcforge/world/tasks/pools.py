"""Task pools per eval suite, each split into disjoint train and held-out (test) parts.

Every builder first draws a pool of distinct prompts, then cuts it in two, so no prompt and no
id is shared between splits. Where a held-out split can use held-out material it does: test
math problems never appear in the corpus, SWE test tasks come from repos reserved for testing,
code test tasks use held-out functions of the code space (`codelib.CodeSpace`), none of whose
structure, behaviour, body or docstring any training text holds.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from itertools import zip_longest

from arcforge.types import Task, Validation
from arcforge.world.code.codelib import CodeSpace, FuncTemplate, informative_calls, load_source
from arcforge.world.code.mutations import KINDS
from arcforge.world.code.pysource import WORLD_SWE_TOOLS
from arcforge.world.code.repos import Repo
from arcforge.world.knowledge.kb import KB
from arcforge.world.knowledge.names import NameBank
from arcforge.world.knowledge.pages import Page
from arcforge.world.tasks.constrained_chat import make_chat_item
from arcforge.world.tasks.longctx import make_long_items
from arcforge.world.tasks.mathgen import Problem
from arcforge.world.tasks.questions import Question, calc_question, path_question
from arcforge.world.tasks.terminal_scenarios import COPY_FAMILIES, FAMILIES, make_scenario

SUITES = ("reasoning", "tool", "chat", "long_context", "code", "terminal", "swe", "search")
Split = tuple[list[Task], list[Task]]


def _distinct(
    make: Callable[[], Task | None], n: int, exclude: set[str] | None = None
) -> list[Task]:
    """Draw up to `n` tasks with distinct instructions, none in `exclude` (another suite's
    prompts); gives up after 30n tries."""
    out: list[Task] = []
    seen: set[str] = set(exclude or ())
    for _ in range(30 * n):
        if len(out) >= n:
            break
        t = make()
        if t is not None and t.instruction not in seen:
            seen.add(t.instruction)
            out.append(t)
    return out


def _finish(suite: str, tasks: list[Task], split: str) -> list[Task]:
    for i, t in enumerate(tasks):
        t.id, t.split, t.source = f"{suite}-{split}-{i:05d}", split, f"world:{suite}"
    return tasks


def _cut(suite: str, pool: list[Task], n_train: int) -> Split:
    return _finish(suite, pool[:n_train], "train"), _finish(suite, pool[n_train:], "test")


def reasoning_tasks(train: list[Problem], test: list[Problem]) -> Split:
    def task(p: Problem) -> Task:
        meta = {
            "reasoning": p.reasoning,
            "steps": p.steps,
            "n_steps": p.n_steps,
            "digits": p.digits,
            "theme": p.theme,
        }
        return Task(
            "",
            "math",
            p.question,
            validation=Validation(answer=str(p.answer)),
            difficulty=p.difficulty,
            metadata=meta,
        )

    return (
        _finish("reasoning", [task(p) for p in train], "train"),
        _finish("reasoning", [task(p) for p in test], "test"),
    )


def _question_task(kind: str, q: Question, tools: list[str], meta: dict) -> Task:
    path = [[t.subject, t.relation, t.object] for t in q.path]
    return Task(
        "",
        kind,
        q.text,
        tools=tools,
        validation=Validation(answer=q.answer),  # type: ignore[arg-type]
        difficulty=min(
            1.0, (q.hops + (1 if q.calls and q.calls[-1]["name"] == "calculator" else 0)) / 4
        ),
        metadata={"hops": q.hops, "path": path, "calls": q.calls, **meta},
    )


def tool_tasks(rng: random.Random, kb: KB, n_train: int, n_test: int) -> Split:
    starts = [e.name for e in kb.entities]

    def make() -> Task | None:
        r = rng.random()
        q = (
            calc_question(rng, kb)
            if r < 0.2
            else path_question(rng, kb, 1 if r < 0.6 else 2, starts)
        )
        return None if q is None else _question_task("tool", q, ["lookup", "calculator"], {})

    return _cut("tool", _distinct(make, n_train + n_test), n_train)


def search_tasks(
    rng: random.Random,
    kb: KB,
    pages: list[Page],
    n_train: int,
    n_test: int,
    hops: Sequence[int] = (2, 2, 3),
    exclude: set[str] | None = None,
) -> Split:
    """Multi-hop questions from low-popularity entities, each hop count drawn from `hops`
    (world option `search_hops`), with the pages that hold each hop's fact as evidence; none
    is a question of `exclude` (the tool suite's: one-hop questions of both look alike)."""
    if not hops or any(h < 1 for h in hops):
        raise ValueError(f"search hops must be a non-empty list of counts >= 1, got {list(hops)}")
    main_page = {p.subject: p.id for p in pages if p.title == p.subject}
    # start from low-frequency entities, as search synthesis does
    starts = [
        e.name for e in kb.entities if e.popularity <= 1 and e.type in ("work", "org", "person")
    ]

    def make() -> Task | None:
        q = path_question(rng, kb, rng.choice(list(hops)), starts)
        if q is None:
            return None
        evidence = [main_page[t.subject] for t in q.path if t.subject in main_page]
        return _question_task("search", q, ["search", "open_page"], {"evidence": evidence})

    return _cut("search", _distinct(make, n_train + n_test, exclude), n_train)


def chat_tasks(rng: random.Random, kb: KB, n_train: int, n_test: int) -> Split:
    def make() -> Task:
        item = make_chat_item(rng, kb)
        return Task(
            "",
            "chat",
            item.prompt,
            validation=Validation(constraints=item.constraints),
            difficulty=len(item.constraints) / 5,
            metadata={"solution": item.solution},
        )

    return _cut("chat", _distinct(make, n_train + n_test), n_train)


def long_context_tasks(
    kb: KB, pages: list[Page], sizes: list[int], seed: int, n_train: int, n_test: int
) -> Split:
    out = []
    for split, n in (("train", n_train), ("test", n_test)):
        tasks = []
        for i in range(n):
            size = sizes[i % len(sizes)]
            rng = random.Random(f"{seed}:long_context:{split}:{i}")
            item = make_long_items(kb, pages, 1, size, split, rng)[0]
            ins = f"{item.text}\n\nQuestion: {item.question}"
            tasks.append(
                Task(
                    "",
                    "lm",
                    ins,
                    validation=Validation(answer=item.answer),
                    difficulty=min(1.0, item.chars / max(sizes)),
                    metadata={
                        "chars": item.chars,
                        "item_kind": item.kind,
                        "question": item.question,
                    },
                )
            )
        out.append(_finish("long_context", tasks, split))
    return out[0], out[1]


def code_task(rng: random.Random, tpl: FuncTemplate, name: str) -> Task:
    """A HumanEval-style task: the instruction ends with the function's stub (signature and
    docstring) in a ```python block; a reply may be the body that completes it or the whole
    function (CodeEnv prepends `context["stub"]` when the reply does not define `name`)."""
    src = tpl.render(name)
    ns = load_source(src)
    (example, shown), *graded = informative_calls(ns, name, tpl.gen, rng, 6)
    asserts = [
        f"def test_{name}_{i}():\n    assert {call} == {out}\n"
        for i, (call, out) in enumerate(graded)
    ]
    tests = f"from solution import {name}\n\n\n" + "\n\n".join(asserts)
    stub = tpl.stub(name)
    ins = (
        f"Complete the Python function `{name}` below; reply with its body (or the whole "
        f"function) in a ```python block. For example, `{example}` returns "
        f"`{shown}`.\n```python\n{stub}```"
    )
    return Task(
        "",
        "code",
        ins,
        context={"stub": stub},
        validation=Validation(tests=tests),
        difficulty=0.5,
        metadata={
            "entry_point": name,
            "solution": src,
            "body": tpl.body(name),
            "template": tpl.key,
            "structure": tpl.structure,
        },
    )


def code_pool(
    rng: random.Random,
    functions: list[FuncTemplate],
    n: int,
    names: NameBank | None = None,
    fresh: float = 0.0,
) -> list[Task]:
    """Up to `n` code tasks, one distinct function of `functions` each (in a random order).
    With `fresh` > 0 a task is named, with that chance, by a made-up identifier from `names`
    (whose own rng draws it, so `rng`'s draws stay as they were)."""
    order = rng.sample(functions, min(n, len(functions)))
    out = []
    for tpl in order:
        name = tpl.names[rng.randrange(len(tpl.names))]
        if fresh and names is not None and names.rng.random() < fresh:
            name = "_".join(names.token() for _ in range(names.rng.randint(1, 2))) + "_fn"
        out.append(code_task(rng, tpl, name))
    return out


def code_tasks(
    rng: random.Random,
    space: CodeSpace,
    n_train: int,
    n_test: int,
    names: NameBank | None = None,
    fresh: float = 0.0,
) -> Split:
    """Train tasks come from the space's train functions, test tasks from its held-out ones,
    one distinct function per task. With `fresh` > 0 (world option `code_fresh_names`) train
    tasks may carry made-up names (`code_pool`)."""
    train = code_pool(rng, space.train, n_train, names, fresh)
    test = code_pool(rng, space.test, n_test)
    return _finish("code", train, "train"), _finish("code", test, "test")


def terminal_tasks(
    rng: random.Random, names: NameBank, n_train: int, n_test: int, fresh: float = 0.0
) -> Split:
    """Per family, a quarter of its distinct instructions (at least one, at most its share of
    `n_test`) is held out; train tasks use the rest (`fresh`: the chance of a made-up value in
    each open slot, `make_scenario`). Train tasks may repeat an instruction
    with other files (the command is the same, the expected output is not); no instruction is
    in both splits. Both splits interleave the families, so any prefix covers them all."""

    def even(n: int) -> list[int]:  # n spread over the families, earlier ones take the rest
        return [n // len(FAMILIES) + (i < n % len(FAMILIES)) for i in range(len(FAMILIES))]

    by_family: list[tuple[list[Task], list[Task]]] = []
    for fam, k_train, k_test in zip(FAMILIES, even(n_train), even(n_test)):
        drawn = [
            _terminal_task(make_scenario(rng, names, fam, fresh))
            for _ in range(2 * (k_train + k_test))
        ]
        keys = list(dict.fromkeys(t.instruction for t in drawn))  # distinct, in draw order
        held = set(keys[: min(k_test, max(1, len(keys) // 4))])
        test = list({t.instruction: t for t in reversed(drawn) if t.instruction in held}.values())
        train = [t for t in drawn if t.instruction not in held][:k_train]
        by_family.append((train, test[:k_test]))
    train, test = (
        [t for row in zip_longest(*side) for t in row if t is not None] for side in zip(*by_family)
    )
    return _finish("terminal", train, "train"), _finish("terminal", test, "test")


def _terminal_task(s) -> Task:  # s: arcforge.world.tasks.terminal_scenarios.Scenario
    return Task(
        "",
        "terminal",
        s.instruction,
        context={"init_script": s.init_script},
        validation=Validation(verify_script=s.verify_script),
        difficulty=0.75 if s.family in COPY_FAMILIES else 0.5,
        metadata={"solution": s.solution, "family": s.family, "look": s.look},
    )


def swe_tasks(
    rng: random.Random,
    repos: list[Repo],
    n_test_repos: int,
    n_train: int,
    n_test: int,
    names: NameBank | None = None,
    fresh: float = 0.0,
    fresh_functions: float = 0.0,
    balance: random.Random | None = None,
) -> Split:
    """Bugs injected in the first `n_test_repos` repos are held out; train bugs come from the
    rest. Held-out bugs take the bug kinds (`mutations.KINDS`) in turn, so every kind is
    represented, and each fixes another function (fewer items when the held-out repos run out).
    With `fresh` > 0 (world option `swe_fresh_repos`) a train task's repo is, with that
    chance, renamed to a made-up name from `names` (its own rng: `rng`'s draws, and so the
    bugs, stay as they were); `context["renamed_from"]` names the world repo it copies. With
    `fresh_functions` > 0 (world option `swe_fresh_functions`) a train task's repo has, with
    that chance, every function renamed to a made-up name from `names`
    (`Repo.functions_renamed`); `context["functions_renamed"]` maps old names to new. With
    `balance` (world option `swe_balance`), the train draws are topped up from that rng to
    4 x `n_train` bugs and the train split keeps `n_train` of them, taking turns by buggy
    function; `rng`'s draws, the test split among them, stay as they were.

    A task's hidden test files are in `validation.tests` (JSON: path -> graded text) and
    nowhere else; `metadata` holds the oracle (the fix diff, the fixed definition, the kind)."""
    out = []
    groups = (("train", repos[n_test_repos:], n_train), ("test", repos[:n_test_repos], n_test))
    for split, group, n in groups:
        tasks: list[Task] = []
        seen: set = set()
        draws = [(rng, n)] + ([(balance, 4 * n)] if split == "train" and balance else [])
        for r, want in draws:
            _draw_bugs(r, group, want, split, names, fresh, fresh_functions, tasks, seen)
        if len(draws) > 1:
            by_function: dict[str, list[Task]] = {}
            for t in tasks:
                by_function.setdefault(t.context["bug"]["function"], []).append(t)
            turns = [t for row in zip_longest(*by_function.values()) for t in row if t is not None]
            tasks = turns[:n]
        out.append(_finish("swe", tasks, split))
    return out[0], out[1]


def _draw_bugs(
    rng: random.Random,
    group: list[Repo],
    n: int,
    split: str,
    names: NameBank | None,
    fresh: float,
    fresh_functions: float,
    tasks: list[Task],
    seen: set,
) -> None:
    """Append to `tasks` until it holds `n` distinct bugs (10n tries), drawn from `group`. A
    test bug tries the kinds the split has least of first (in turn among equals); no two test
    bugs share a function or a fixed definition (a small world may yield fewer than `n`)."""
    for _ in range(n * 10):
        if len(tasks) >= n or not group:
            break
        repo = origin = rng.choice(group)
        if split == "train" and fresh and names is not None and names.rng.random() < fresh:
            repo = origin.renamed(f"{names.token()}-{names.token()}")
        if (
            split == "train"
            and fresh_functions
            and names is not None
            and names.rng.random() < fresh_functions
        ):
            made = {f: f"{names.token()}_{names.token()}" for f in repo.functions()}
            repo = repo.functions_renamed(made)
        else:
            made = {}
        kinds = None
        if split == "test":  # the least used kinds first (a repo may lack some)
            used = Counter(t.metadata["bug_kind"] for t in tasks)
            kinds = sorted(
                KINDS, key=lambda k: (used[k], (KINDS.index(k) - len(tasks)) % len(KINDS))
            )
        try:
            bug = repo.inject_bug(rng, kinds)
        except ValueError:
            continue  # no bug of any kind in this repo: another repo
        fixed = bug.fixed_definition()
        if (bug.repo, bug.path, bug.mutated) in seen or bug.issue_text in seen:
            continue
        where = (bug.repo, bug.path, bug.function)
        if split == "test" and (fixed in seen or where in seen):
            continue  # one distinct function per held-out item: fewer items rather than repeats
        seen.update({(bug.repo, bug.path, bug.mutated), bug.issue_text, fixed, where})
        hidden = ("original", "fix_diff", "hidden_tests", "detail")
        ctx_bug = {k: v for k, v in asdict(bug).items() if k not in hidden}
        context = {"repo": repo.name, "bug": ctx_bug}
        if repo.name != origin.name:
            context["renamed_from"] = origin.name
        if made:
            context["functions_renamed"] = made
        tasks.append(
            Task(
                "",
                "swe",
                bug.issue_text,
                context=context,
                tools=list(WORLD_SWE_TOOLS),
                validation=Validation(
                    tests=json.dumps(bug.hidden_tests),
                    fail_to_pass=bug.fail_to_pass,
                    pass_to_pass=bug.pass_to_pass,
                ),
                difficulty=0.5,
                metadata={
                    "patch": bug.fix_diff,
                    "bug_kind": bug.kind,
                    "fixed": fixed,
                    "detail": bug.detail,
                },
            )
        )
