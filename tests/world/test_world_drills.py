"""Copy drills: fresh invented names, each mentioned again later, mixed into the corpus only
when `copy_drills` asks for them."""

import random
import re

from arcforge.world import WorldConfig, build_world
from arcforge.world.text.drills import copy_drills

NAME = re.compile(r"[A-Z][a-z]+ [A-Z][a-z]+")


def test_drills_repeat_their_names_and_reach_the_size():
    docs = copy_drills(random.Random(3), 20_000)
    assert 20_000 <= sum(len(d.text) for d in docs) < 24_000
    for d in docs:
        names = NAME.findall(d.text)
        # every document mentions some two-word name at least twice: copying is the only way
        # to predict the second mention
        assert any(names.count(n) >= 2 for n in names), d.text
    assert copy_drills(random.Random(3), 5_000)[0].text == docs[0].text  # seeded


def test_world_mixes_drills_in_on_request_only(world):
    assert not any(d.id.startswith("drill-") for d in world.corpus())
    drilled = build_world(WorldConfig(seed=7, scale=0.1, copy_drills=0.2))
    drills = [d for d in drilled.corpus() if d.id.startswith("drill-")]
    web = sum(len(d.text) for d in drilled.corpus() if d.id.startswith("web-"))
    assert 0.1 * web < sum(len(d.text) for d in drills) < 0.3 * web
    people = [e.name for e in drilled.kb.entities if " " in e.name][:300]
    text = "\n".join(d.text for d in drills)
    assert people and not any(f"{n}," in text or f"{n}." in text for n in people)
