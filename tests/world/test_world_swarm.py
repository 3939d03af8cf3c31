"""Wide search tasks: answers are the KB's facts, splits share no entity, generation is
deterministic, and the scripted experts' plans match the task."""

from arcforge.world.tasks.wide_search import (
    SEPARATOR,
    entity_split,
    single_expert_script,
    subtasks,
    swarm_expert_script,
    swarm_tasks,
)


def test_wide_tasks_hold_the_kb_facts_and_split_by_entity(world):
    train, test = swarm_tasks(world, "train"), swarm_tasks(world, "test")
    assert len(train) == 200 and len(test) == 50
    for t in train + test:
        rel, names, values = (t.metadata[k] for k in ("relation", "entities", "values"))
        assert t.kind == "swarm" and len(names) == t.metadata["width"] == len(set(names))
        assert values == [world.kb.get(e, rel) for e in names]
        assert t.validation.answer == SEPARATOR.join(values)
        assert all(e in t.instruction for e in names)
        assert {entity_split(e) for e in names} == {t.split}
    used = lambda ts: {e for t in ts for e in t.metadata["entities"]}  # noqa: E731
    assert not used(train) & used(test)
    assert len({t.instruction for t in train + test}) == 250
    assert [t.instruction for t in swarm_tasks(world, "test")] == [t.instruction for t in test]


def test_expert_plans_cover_every_item(world):
    task = swarm_tasks(world, "test", n=1)[0]
    first, last = swarm_expert_script(task)
    assigned = [c.arguments["task"] for c in first.tool_calls if c.name == "assign_task"]
    assert assigned == [s.instruction for s in subtasks(task)]
    assert last.tool_calls[0].arguments["text"] == task.validation.answer
    single = single_expert_script(task)
    assert len(single) == task.metadata["width"] + 1
