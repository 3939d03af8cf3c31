"""Judge rubrics for general RL: GLM-5's three dimensions and the task-specific categories.

Each rubric is plain text a generative reward model (an LLM judge) reads before scoring a reply
on a 1-10 scale. Every rubric covers the three dimensions of GLM-5's general RL:
    basic correctness      instruction following, logical consistency, facts, fluency
    emotional intelligence tone and empathy that fit the user, without verbosity or canned
                           "AI-flavoured" phrasing
    task-specific quality  what makes this category good (writing, translation, role-play, QA,
                           text processing)
`rubric_for(task)` routes a task to its category: `metadata["category"]` when set (the
hand-written anchors set it), else JSON tasks are text processing and other chat tasks writing.
"""

from __future__ import annotations

from arcforge.types import Task

BASE = """Score the assistant's reply from 1 (very poor) to 10 (excellent) on three dimensions:
1. Basic correctness: does it follow every instruction and constraint exactly? Is it logically
   consistent, factually right, free of invented facts, fluent?
2. Emotional intelligence: is the tone natural and fitting, empathetic where the user needs it,
   without padding, flattery, repetition or canned assistant phrases? Shorter is better when
   nothing is lost.
3. Task-specific quality: {task}"""

TASK_QUALITY: dict[str, str] = {
    "writing": "is the writing clear, specific and well organised for its purpose?",
    "translation": "is the meaning fully preserved, the target language idiomatic, and nothing "
    "added or dropped?",
    "roleplay": "does it stay in character and in the scene while still helping the user?",
    "qa": "is the answer correct, direct and complete, with only the explanation it needs?",
    "text_processing": "is the output exactly in the requested format (e.g. valid JSON with the "
    "requested keys) and faithful to the input?",
    "empathy": "does it acknowledge the person's situation and offer warm, practical support "
    "in plain words?",
}

OUTPUT = (
    """Reply with a short reason, then a final line of the form "Score: N" with N from 1 to 10."""
)


def category_of(task: Task) -> str:
    """The task's category: metadata["category"], else text_processing (JSON) or writing."""
    cat = task.metadata.get("category")
    if cat:
        if cat not in TASK_QUALITY:
            raise ValueError(
                f"task {task.id}: unknown category {cat!r}; known: {sorted(TASK_QUALITY)}"
            )
        return cat
    cons = task.validation.constraints
    return "text_processing" if any(c.get("type") == "json_keys" for c in cons) else "writing"


def rubric_for(task: Task) -> str:
    """The full judge rubric for a task (three dimensions + its category's quality question)."""
    return BASE.format(task=TASK_QUALITY[category_of(task)]) + "\n\n" + OUTPUT
