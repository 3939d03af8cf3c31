"""Slides tasks from the world: disjoint splits, self-contained context, a rule-abiding expert."""

from arcforge.rewards.slides_static import static_check
from arcforge.types import Task
from arcforge.world.tasks.slide_decks import (
    DesignRules,
    make_slides_task,
    reference_deck,
    slides_tasks,
)


def test_splits_are_disjoint_deterministic_and_self_contained(world):
    train, test = slides_tasks(world.kb, 6, 3, seed=1)
    assert (len(train), len(test)) == (6, 3)
    assert {t.context["topic"] for t in train}.isdisjoint(t.context["topic"] for t in test)
    again, _ = slides_tasks(world.kb, 6, 3, seed=1)
    assert [t.to_dict() for t in again] == [t.to_dict() for t in train]
    for t in train + test:
        assert Task.from_dict(t.to_dict()) == t  # JSONL round trip
        outline, assets = t.context["outline"], t.context["assets"]
        assert outline[0]["title"] == t.context["topic"] and len(outline) >= 3
        assert all(len(s["bullets"]) >= 2 for s in outline[1:])
        assert len({a["src"] for a in assets}) == len(assets)  # each asset named once
        assert all(a["src"] in t.instruction for a in assets)
        assert t.metadata["scorer"] == "slides"


def test_bullets_are_world_facts(world):
    from arcforge.world.knowledge.kb import RELATIONS

    sentences = {f"{t.subject} {RELATIONS[t.relation]} {t.object}" for t in world.kb.triples}
    for task in slides_tasks(world.kb, 3, 0, seed=2)[0]:
        bullets = [b for s in task.context["outline"][1:] for b in s["bullets"]]
        assert bullets and all(b in sentences for b in bullets)


def test_reference_deck_passes_every_static_check(world):
    for task in slides_tasks(world.kb, 4, 0, seed=3)[0]:
        deck = reference_deck(task)
        rep = static_check(
            deck, task.context["assets"], DesignRules.from_dict(task.context["design"])
        )
        assert rep.n_slides == len(task.context["outline"])
        assert rep.html_errors == [] and rep.deck == [] and not any(rep.slides)
        assert all(n == 1 for n in rep.images.values()) and not any(rep.image_problems)


def test_unknown_topic_and_design_keys_are_named(world):
    import random

    import pytest

    with pytest.raises(ValueError, match="unknown topic 'Nowhere'"):
        make_slides_task(world.kb, "Nowhere", random.Random(0))
    with pytest.raises(ValueError, match="unknown key.*fontsize"):
        DesignRules.from_dict({"fontsize": 3})
