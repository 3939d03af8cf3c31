"""The compositional code space: large, deterministic, split by structure, and held-out
functions whose behaviour, normalised body and docstring no train function has."""

import math
import random

import pytest

from arcforge.world.code.codelib import (
    INT_FILTERS,
    INT_MAPS,
    REC_MAPS,
    REDUCERS,
    THEME_DEFS,
    CodeSpace,
    code_space,
    compose,
    fingerprints,
    held_out_structure,
    load_source,
    normalised_body,
    shared_share,
    windows,
)


@pytest.fixture(scope="module")
def space() -> CodeSpace:
    return code_space(0)


def _part(parts, kind):
    return next(p for p in parts if p.kind == kind)


def _red(kind):
    return next(r for r in REDUCERS if r.kind == kind)


def test_space_is_large_and_names_are_unique(space):
    assert len(space.train) >= 2000 and len(space.test) >= 300
    names = [t.names[0] for t in space.train + space.test]
    assert len(set(names)) == len(names)
    assert len({t.key for t in space.train + space.test}) == len(names)
    assert len({t.structure for t in space.train}) > 1000  # shapes, not just parameters


def test_split_is_by_structure_and_behaviour(space):
    train_structures = {t.structure for t in space.train}
    assert not train_structures & {t.structure for t in space.test}
    assert all(held_out_structure(0, t.structure) for t in space.test)
    assert not any(held_out_structure(0, t.structure) for t in space.train)
    assert not set(fingerprints(space.train)) & set(fingerprints(space.test))
    assert not {normalised_body(t) for t in space.train} & {normalised_body(t) for t in space.test}
    assert not {t.docstring() for t in space.train} & {t.docstring() for t in space.test}
    grams = {w for t in space.train for w in windows(t.body("f"))}
    assert max(shared_share(t.body("f"), grams) for t in space.test) < 0.25


def test_space_is_deterministic_per_seed():
    a, b, c = CodeSpace.build(3, 300, 80), CodeSpace.build(3, 300, 80), CodeSpace.build(4, 300, 80)
    assert [t.key for t in a.train + a.test] == [t.key for t in b.train + b.test]
    assert [t.key for t in a.train] != [t.key for t in c.train]


def test_every_function_runs_and_shows_a_one_line_stub(space):
    rng = random.Random(0)
    for t in rng.sample(space.train, 150) + rng.sample(space.test, 50):
        fn = load_source(t.render("g"))["g"]
        for _ in range(3):
            fn(*t.gen(rng))  # generated inputs never make a function raise
        assert t.stub("g").count("\n") == 2 and t.stub("g") + t.body("g") == t.render("g")


def _compose(theme, flt, fk, mp, mk, red, arg=False, seed=0):
    for s in range(seed, seed + 50):  # identifiers are drawn: retry until the parts fit
        t = compose(THEME_DEFS[theme], flt, fk, mp, mk, red, arg, random.Random(s))
        if t is not None:
            return t
    raise AssertionError("parts never fit")


def test_a_product_of_mapped_values_groups_the_map():
    # product of (x + 3) over the odd x of [1, 2, 5] = 4 * 8 = 32; without grouping the
    # expression `acc * x + 3` would give ((1*1+3)*5+3) = 23
    for seed in range(6):  # both styles: `acc *= x + 3` and `acc = acc * (x + 3)`
        t = _compose(
            "lists",
            _part(INT_FILTERS, "odd"),
            None,
            _part(INT_MAPS, "add"),
            3,
            _red("product"),
            seed=seed,
        )
        assert load_source(t.render("g"))["g"]([1, 2, 5]) == 32


def test_the_docstring_says_what_the_code_does():
    t = _compose("lists", _part(INT_FILTERS, "gt"), 4, _part(INT_MAPS, "mul"), 2, _red("sum"))
    assert "sum" in t.docstring() and "greater than 4" in t.docstring()
    assert "multiplied by 2" in t.docstring()
    assert load_source(t.render("g"))["g"]([1, 5, 9, 4]) == 2 * (5 + 9)
    # a defaulted argument: the filter's parameter, documented with its default
    t = _compose("lists", _part(INT_FILTERS, "lt"), 3, None, None, _red("collect"), arg=True)
    assert "limit=3" in t.stub("g") and "limit defaults to 3" in t.docstring()
    g = load_source(t.render("g"))["g"]
    assert g([1, 4, 2]) == [1, 2] and g([1, 4, 2], 5) == [1, 4, 2]
    # records: the map says what is reduced, in key order
    t = _compose("records", None, None, _part(REC_MAPS, "key_len"), None, _red("collect"))
    assert load_source(t.render("g"))["g"]({"bb": 1, "a": 2}) == [1, 2]
    t = _compose("numbers", _part(INT_FILTERS, "div"), 3, None, None, _red("product"))
    lo = int(t.names[0].rsplit("from", 1)[1])
    expected = math.prod(i for i in range(lo, 10) if i % 3 == 0)
    assert load_source(t.render("g"))["g"](9) == expected


def test_parts_that_do_not_fit_are_refused():
    lists = THEME_DEFS["lists"]
    rng = random.Random(0)
    # a join needs strings; a count ignores a map; an argument needs a parameterised filter
    assert compose(lists, None, None, None, None, _red("join"), False, rng) is None
    assert (
        compose(lists, None, None, _part(INT_MAPS, "sq"), None, _red("count"), False, rng) is None
    )
    assert (
        compose(lists, _part(INT_FILTERS, "odd"), None, None, None, _red("sum"), True, rng) is None
    )
