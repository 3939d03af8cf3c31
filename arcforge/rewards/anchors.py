"""Human-written anchor answers for general RL (data: anchors.jsonl next to this file).

GLM-5 mixes high-quality human-written answers into general RL as style anchors: a policy that
only optimizes its own samples against learned judges drifts into verbose, formulaic
"AI-flavoured" text. Each anchor is an instruction from one rubric category (empathy, writing,
translation, roleplay, qa, text_processing) with checkable constraints and a short answer a
person wrote, which satisfies them. They become chat tasks (`anchor_tasks`); how they enter the
batch and the loss is described in `arcforge.train.general_rl` (AnchorEngine). Their answers
also set the reference length for the hybrid reward's length guard (metadata["anchor"]).
"""

from __future__ import annotations

import json
from pathlib import Path

from arcforge.errors import UserError
from arcforge.rewards.rubrics import TASK_QUALITY
from arcforge.types import Task, Validation

ANCHORS_FILE = Path(__file__).with_name("anchors.jsonl")


def anchor_tasks(path: str | Path | None = None) -> list[Task]:
    """The anchors as chat tasks; `metadata["anchor"]` holds the human answer.

    Args:
        path: a JSONL file of {id, category, prompt, answer, constraints}; default: the
            package's own anchors.
    Raises:
        UserError: naming the file and line of a malformed anchor.
    """
    p = Path(path) if path else ANCHORS_FILE
    if not p.is_file():
        raise UserError(f"anchors file not found: {p}")
    out = []
    for n, line in enumerate(p.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            missing = [k for k in ("id", "category", "prompt", "answer") if k not in d]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            if d["category"] not in TASK_QUALITY:
                raise ValueError(f"category {d['category']!r} not in {sorted(TASK_QUALITY)}")
        except ValueError as err:
            raise UserError(f"{p}:{n}: bad anchor: {err}") from None
        out.append(
            Task(
                d["id"],
                "chat",
                d["prompt"],
                source=f"anchors:{p.name}",
                validation=Validation(constraints=d.get("constraints", [])),
                metadata={"anchor": d["answer"], "category": d["category"]},
            )
        )
    return out
