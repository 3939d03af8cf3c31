"""Chained multi-step coding tasks built from `codelib` templates (CC-Bench-style regression).

A chain grows one module, `solution.py`, over 2-4 steps; each step asks for one more function
of a theme (stats, inventory, ...). After every step the grader runs that step's hidden tests
and the tests of every earlier step, so a later step that breaks earlier work (a syntax error,
a redefinition, a changed helper) fails even if its own function is right. Expected values come
from executing the correct template source (`call_repr`), as everywhere in the world. Each
step records its own tests and the oracle source, which the scripted expert submits.
"""

from __future__ import annotations

import random

from arcforge.types import Task, Validation
from arcforge.world.code.codelib import FuncTemplate, call_repr, call_src, code_space, load_source


def chain_step(rng: random.Random, tpl: FuncTemplate, name: str, n_tests: int = 4) -> dict:
    """One step: instruction, hidden tests (importing from `solution`) and oracle source."""
    src = tpl.render(name)
    ns = load_source(src)
    example = call_src(name, tpl.gen(rng))
    tests = [f"from solution import {name}\n"]
    for i in range(n_tests):
        call = call_src(name, tpl.gen(rng))
        tests.append(f"\ndef test_{name}_{i}():\n    assert {call} == {call_repr(ns, call)}\n")
    ins = (
        f"Add a function `{name}({tpl.params})` to solution.py. {tpl.docstring()} For example, "
        f"`{example}` returns `{call_repr(ns, example)}`. Keep every earlier function working. "
        f"Reply with the new code in a ```python block."
    )
    return {"instruction": ins, "tests": "\n".join(tests), "solution": src, "entry_point": name}


def chain_task(rng: random.Random, n_steps: int, functions: list[FuncTemplate]) -> Task:
    """A chain of `n_steps` distinct functions of `functions` from one theme."""
    theme = rng.choice(sorted({t.theme for t in functions}))
    tpls = rng.sample([t for t in functions if t.theme == theme], n_steps)
    steps = [chain_step(rng, t, rng.choice(t.names)) for t in tpls]
    intro = (
        f"You will build a small Python module, solution.py, of {theme} helpers in "
        f"{n_steps} steps. After each step its tests and all earlier steps' tests run.\n\n"
    )
    return Task(
        "",
        "chain",
        intro + "Step 1: " + steps[0]["instruction"],  # type: ignore[arg-type]
        validation=Validation(tests="\n\n".join(s["tests"] for s in steps)),
        difficulty=n_steps / 4,
        metadata={"steps": steps, "theme": theme},
    )


def chain_tasks(seed: int, n: int, split: str = "test") -> list[Task]:
    """`n` chained tasks with 2-4 steps, a pure function of (seed, split); the held-out
    split's steps are the world's held-out functions (`codelib.CodeSpace.test`)."""
    rng = random.Random(f"{seed}:chains:{split}")
    functions = code_space(seed).part(split)
    out = []
    for i in range(n):
        task = chain_task(rng, rng.choice([2, 3, 3, 4]), functions)
        task.id, task.split, task.source = f"chain-{split}-{i:05d}", split, "world:chains"
        out.append(task)
    return out
