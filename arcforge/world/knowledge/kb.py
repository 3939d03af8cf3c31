"""The world's knowledge graph: typed entities and (subject, relation, object) triples.

People, places (cities inside countries), organisations and works, linked by born_in, lives_in,
works_for, founded_by, headquartered_in, located_in, created_by, published_by and year/number
attributes. Multi-hop chains exist by construction (work -> created_by -> person -> born_in ->
city -> located_in -> country), which search synthesis samples later. Popularity follows a
Zipf-like law: a few entities get many extra pages, most appear only on their own page.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Literal

from arcforge.world.knowledge.names import NameBank

EntityType = Literal["person", "city", "country", "org", "work"]

OCCUPATIONS = [
    "engineer",
    "painter",
    "chemist",
    "pilot",
    "teacher",
    "architect",
    "composer",
    "farmer",
    "historian",
    "sailor",
    "baker",
    "surveyor",
]
INDUSTRIES = [
    "shipping",
    "software",
    "textiles",
    "mining",
    "publishing",
    "robotics",
    "agriculture",
    "optics",
    "energy",
    "medicine",
]
WORK_TYPES = ["book", "film", "software"]

# relation -> human phrase used by pages, questions and tool errors
RELATIONS: dict[str, str] = {
    "born_in": "was born in",
    "lives_in": "lives in",
    "works_for": "works for",
    "born_year": "was born in the year",
    "occupation": "works as",
    "located_in": "is located in",
    "population": "has a population of",
    "founded_by": "was founded by",
    "headquartered_in": "is headquartered in",
    "founded_year": "was founded in the year",
    "industry": "works in the industry of",
    "created_by": "was created by",
    "published_by": "was published by",
    "published_year": "was published in the year",
    "work_type": "is a",
    "capital": "has the capital",
}


@dataclass(frozen=True)
class Triple:
    subject: str
    relation: str
    object: str


@dataclass
class Entity:
    """One node. `popularity` = how many extra pages mention it; `heldout` entities have their
    own pages only in the held-out corpus."""

    name: str
    type: EntityType
    popularity: int = 0
    heldout: bool = False


@dataclass
class KB:
    entities: list[Entity] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        self.by_name: dict[str, Entity] = {e.name: e for e in self.entities}
        self.facts: dict[tuple[str, str], str] = {
            (t.subject, t.relation): t.object for t in self.triples
        }
        self.out: dict[str, list[Triple]] = {}
        self.inc: dict[str, list[Triple]] = {}
        for t in self.triples:
            self.out.setdefault(t.subject, []).append(t)
            self.inc.setdefault(t.object, []).append(t)

    def get(self, subject: str, relation: str) -> str | None:
        return self.facts.get((subject, relation))

    def of_type(self, etype: EntityType) -> list[Entity]:
        return [e for e in self.entities if e.type == etype]

    def is_entity(self, name: str) -> bool:
        return name in self.by_name

    def to_dict(self) -> dict:
        return {
            "entities": [asdict(e) for e in self.entities],
            "triples": [asdict(t) for t in self.triples],
        }

    @classmethod
    def from_dict(cls, d: dict) -> KB:
        return cls([Entity(**e) for e in d["entities"]], [Triple(**t) for t in d["triples"]])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KB) and (self.entities, self.triples) == (
            other.entities,
            other.triples,
        )


def _zipf_popularity(rng: random.Random, n: int, max_pop: int) -> list[int]:
    # rank r gets max_pop / (1 + r / (0.05 n)) extra pages: a few hubs, about half get none.
    pops = [int(max_pop / (1 + r / (0.05 * n))) for r in range(n)]
    rng.shuffle(pops)
    return pops


def build_kb(
    rng: random.Random,
    names: NameBank,
    n_people: int,
    n_places: int,
    n_orgs: int,
    n_works: int,
    heldout_frac: float,
) -> KB:
    """Sample entities and relations. Args are entity counts; cities = n_places, countries ~ /8."""
    n_places = max(n_places, 3)
    countries = [names.country() for _ in range(max(3, n_places // 8))]
    cities = [names.place() for _ in range(n_places)]
    people = [names.person() for _ in range(n_people)]
    orgs = [names.org() for _ in range(n_orgs)]
    works = [names.work() for _ in range(n_works)]
    triples: list[Triple] = []

    def add(s: str, r: str, o: object) -> None:
        triples.append(Triple(s, r, str(o)))

    for i, c in enumerate(cities):
        add(
            c,
            "located_in",
            countries[i % len(countries)] if i < len(countries) else rng.choice(countries),
        )
        add(c, "population", rng.randrange(2, 900) * 1000)
    for k, c in zip(countries, cities):  # city i < len(countries) lies in country i
        add(k, "capital", c)
    for p in people:
        add(p, "born_in", rng.choice(cities))
        add(p, "lives_in", rng.choice(cities))
        add(p, "born_year", rng.randint(1900, 2005))
        add(p, "occupation", rng.choice(OCCUPATIONS))
    for o in orgs:
        add(o, "founded_by", rng.choice(people))
        add(o, "headquartered_in", rng.choice(cities))
        add(o, "founded_year", rng.randint(1850, 2020))
        add(o, "industry", rng.choice(INDUSTRIES))
    for p in people:  # after orgs exist
        add(p, "works_for", rng.choice(orgs))
    for w in works:
        add(w, "work_type", rng.choice(WORK_TYPES))
        add(w, "created_by", rng.choice(people))
        add(w, "published_by", rng.choice(orgs))
        add(w, "published_year", rng.randint(1920, 2024))

    entities: list[Entity] = []
    for etype, group, max_pop in (
        ("country", countries, 4),
        ("city", cities, 12),
        ("person", people, 10),
        ("org", orgs, 10),
        ("work", works, 6),
    ):
        pops = _zipf_popularity(rng, len(group), max_pop)
        for name, pop in zip(group, pops):
            held = etype in ("person", "work", "org") and rng.random() < heldout_frac
            entities.append(Entity(name, etype, pop, held))  # type: ignore[arg-type]
    return KB(entities, triples)
