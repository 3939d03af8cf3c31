"""How-to documents for mid-training, written from the world's TRAIN agent tasks.

GLM-5 mid-trains on agentic data as well as repositories and long documents; a real model has
read countless shell how-tos and worked code before it ever sees a tool call. The world's
pretraining corpus has neither, so its model meets the mapping "instruction -> command" only in
a few hundred SFT episodes, too few for a tiny model to learn it (docs/experiments.md,
"Terminal"). What it does learn is the arithmetic format of the math corpus, which it sees
millions of times.

Two kinds of document, each a short text in the layout of the task it teaches:
- terminal: the task's instruction, the command the expert looks with, the command that solves
  it (one per TRAIN terminal task; the held-out tasks' instructions never appear);
- tir: a TRAIN arithmetic problem, its plan and the Python program that computes it
  (`mathgen.tir_program`, the TIR expert's own program), then the answer.

Opt-in (`world:agent_docs[/terminal,tir]` as a mid-training source), not in the demo: added to
the demo's mid-training they left the held-out terminal suite where it was and cost reasoning
(docs/experiments.md, "Terminal").
"""

from __future__ import annotations

from typing import Any

from arcforge.world.tasks.mathgen import tir_program

KINDS = ("terminal", "tir")


def _terminal_doc(task: Any) -> str:
    look, sol = task.metadata.get("look") or "ls -la", task.metadata["solution"].strip()
    return f"Shell task: {task.instruction}\nLook first: `{look}`\nThen run:\n```bash\n{sol}\n```\n"


def _tir_doc(task: Any) -> str:
    plan, code = tir_program(task.metadata["steps"])
    return (
        f"Problem: {task.instruction}\nPlan: {plan}.\nPython:\n```python\n{code}```\n"
        f"Output: {task.validation.answer}\nAnswer: {task.validation.answer}\n"
    )


def agent_docs(world: Any, kinds: tuple[str, ...] = KINDS) -> list[tuple[str, str]]:
    """(id, text) per how-to document, from TRAIN tasks only (see the module docstring).

    Raises:
        ValueError: for a kind not in KINDS.
    """
    bad = sorted(set(kinds) - set(KINDS))
    if bad:
        raise ValueError(f"unknown agent_docs kind(s) {bad}; known: {', '.join(KINDS)}")
    out = []
    if "terminal" in kinds:
        out += [(f"howto-{t.id}", _terminal_doc(t)) for t in world.tasks("terminal", "train")]
    if "tir" in kinds:
        out += [(f"howto-{t.id}", _tir_doc(t)) for t in world.tasks("reasoning", "train")]
    return out
