"""Wide search tasks over the knowledge graph, the agent swarm's task family, and its expert.

A wide task asks for one attribute of several entities of one type ("For each of 4 entities
(A; B; C; D): In which year was it founded? ..."); the answer is the values in order,
separated by "; ". Each item is a one-hop search question of the world's search suite, so a
single agent needs one search per entity before it answers, while an orchestrator can hand
the entities to parallel subagents and answer after one stage: the critical path shortens
with the width, the total work does not.

Splits are held out by entity: an entity belongs to the test split when a hash of its name
says so (about one in five), and a task of a split draws only that split's entities, so no
test item shares an entity with a train item. Tasks are generated on demand from the world's
seed (`swarm_tasks`); nothing is stored in the world.

`swarm_expert_script` is the scripted orchestrator (used for SFT episodes): create one search
subagent, assign every entity's question in one reply, answer the list. `subtasks` gives each
item as a search Task with its one-hop path, which the scripted search expert
(arcforge.rollout.policies) answers, so expert subagents can run under the expert orchestrator.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from arcforge.types import Message, Task, ToolCall, Validation
from arcforge.world.tasks.questions import QUESTION

SEPARATOR = "; "
WIDTHS = (3, 4, 5, 6)
# entity type -> attributes asked about (one-hop facts on the entity's own page)
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "person": ("born_in", "lives_in", "born_year", "occupation", "works_for"),
    "org": ("headquartered_in", "founded_year", "industry", "founded_by"),
    "work": ("created_by", "published_by", "published_year", "work_type"),
    "city": ("located_in", "population"),
}
SUBAGENT_TOOLS = ["search", "open", "answer"]
SUBAGENT_INSTRUCTIONS = "Search for the fact, then answer with the value only."


def entity_split(name: str) -> str:
    """ "test" for about one entity in five (by a hash of its name), else "train"."""
    return "test" if hashlib.sha1(f"swarm:{name}".encode()).digest()[0] % 5 == 0 else "train"


def item_question(entity: str, relation: str) -> str:
    """The one-hop question of one item, as the search suite words it."""
    return QUESTION[relation].format(s=entity)


def wide_instruction(entities: Sequence[str], relation: str) -> str:
    return (
        f"For each of {len(entities)} entities ({SEPARATOR.join(entities)}): "
        f"{QUESTION[relation].format(s='it')} Answer with the values in that order, "
        f'separated by "{SEPARATOR.strip()} ".'
    )


def swarm_tasks(
    world: Any, split: str = "train", n: int | None = None, widths: Sequence[int] = WIDTHS
) -> list[Task]:
    """Wide search tasks of one split (kind "swarm"; see the module docstring).

    Args:
        world: the embedded world (its KB and seed).
        split: "train" or "test".
        n: how many (default 200 train, 50 test); fewer when the split runs out of
            distinct tasks.
        widths: the entity counts to draw from.

    Returns:
        Tasks with metadata relation, entities, values, width; validation.answer the list.
    """
    if split not in ("train", "test"):
        raise ValueError(f"swarm tasks have splits 'train' and 'test', got {split!r}")
    if not widths or min(widths) < 1:
        raise ValueError(f"widths must be counts >= 1, got {list(widths)}")
    n = (200 if split == "train" else 50) if n is None else n
    kb = world.kb
    rng = random.Random(f"{world.config.seed}:swarm:{split}")
    pools = {
        (etype, rel): [
            e.name
            for e in kb.of_type(etype)  # type: ignore[arg-type]
            if entity_split(e.name) == split and kb.get(e.name, rel) is not None
        ]
        for etype, rels in ATTRIBUTES.items()
        for rel in rels
    }
    keys = sorted(k for k, names in pools.items() if len(names) >= min(widths))
    out: list[Task] = []
    seen: set[str] = set()
    for _ in range(30 * n):
        if len(out) >= n or not keys:
            break
        etype, rel = rng.choice(keys)
        width = rng.choice([w for w in widths if w <= len(pools[(etype, rel)])])
        names = rng.sample(pools[(etype, rel)], width)
        instruction = wide_instruction(names, rel)
        if instruction in seen:
            continue
        seen.add(instruction)
        values = [str(kb.get(e, rel)) for e in names]
        out.append(
            Task(
                f"swarm-{split}-{len(out):05d}",
                "swarm",
                instruction,  # type: ignore[arg-type]
                validation=Validation(answer=SEPARATOR.join(values)),
                source="world:swarm",
                difficulty=min(1.0, width / 8),
                split=split,
                metadata={"relation": rel, "entities": names, "values": values, "width": width},
            )
        )
    return out


def single_agent_task(task: Task) -> Task:
    """The same wide task for one agent in the search environment (the swarm's baseline)."""
    return Task(
        task.id,
        "search",
        task.instruction,
        tools=["search", "open"],
        validation=Validation(answer=task.validation.answer),
        source=task.source,
        difficulty=task.difficulty,
        split=task.split,
        metadata=dict(task.metadata),
    )


def subtasks(task: Task) -> list[Task]:
    """Each item of a wide task as a one-hop search Task (with its path, for the expert)."""
    rel = task.metadata["relation"]
    return [
        Task(
            f"{task.id}/item{i}",
            "search",
            item_question(e, rel),
            tools=["search", "open"],
            validation=Validation(answer=v),
            metadata={"hops": 1, "path": [[e, rel, v]]},
        )
        for i, (e, v) in enumerate(zip(task.metadata["entities"], task.metadata["values"]))
    ]


def swarm_expert_script(task: Task, agent: str = "finder") -> list[Message]:
    """The scripted orchestrator: one search subagent, every item assigned in one reply (one
    parallel stage), then the list as the answer (the script knows it from the task; the
    episode is kept only when the subagents' observations bore it out)."""
    rel, names = task.metadata["relation"], task.metadata["entities"]
    create = ToolCall(
        "create_subagent",
        {"name": agent, "instructions": SUBAGENT_INSTRUCTIONS, "tools": list(SUBAGENT_TOOLS)},
    )
    assigns = [
        ToolCall("assign_task", {"agent": agent, "task": item_question(e, rel)}) for e in names
    ]
    plan = (
        f"{len(names)} independent lookups of the {rel.replace('_', ' ')}: one subagent "
        "runs them in parallel."
    )
    answer = SEPARATOR.join(task.metadata["values"])
    return [
        Message("assistant", "", reasoning=plan, tool_calls=[create, *assigns]),
        Message(
            "assistant",
            "",
            reasoning="The subagents found every value.",
            tool_calls=[ToolCall("answer", {"text": answer})],
        ),
    ]


def single_expert_script(task: Task) -> list[Message]:
    """The scripted single agent on a wide task: one name + relation search per entity (the
    search expert's query, whose first result's snippet shows the fact), then the list."""
    rel = task.metadata["relation"]
    calls = [
        Message(
            "assistant",
            "",
            reasoning=f"I need the {rel.replace('_', ' ')} of {e}.",
            tool_calls=[ToolCall("search", {"query": f"{e} {rel.replace('_', ' ')}"})],
        )
        for e in task.metadata["entities"]
    ]
    answer = SEPARATOR.join(task.metadata["values"])
    return calls + [
        Message(
            "assistant",
            "",
            reasoning="I have every value.",
            tool_calls=[ToolCall("answer", {"text": answer})],
        )
    ]
