"""Code tasks: held-out (template, name) variants, and made-up train names (code_fresh_names)."""

import random

from arcforge.world.codelib import TEMPLATES, load_source
from arcforge.world.names import NameBank
from arcforge.world.suites import code_tasks


def _variants(tasks):
    return {(t.metadata["template"], t.metadata["entry_point"]) for t in tasks}


def _passes(task) -> bool:
    ns = load_source(task.metadata["solution"])
    tests = task.validation.tests.split("\n", 1)[1]  # drop `from solution import ...`
    exec(tests, ns)  # noqa: S102 - our own generated tests
    for name, fn in list(ns.items()):
        if name.startswith("test_"):
            fn()
    return True


def test_fresh_names_are_made_up_and_leave_the_held_out_variants_alone():
    known = {n for t in TEMPLATES for n in t.names}
    tr0, te0 = code_tasks(random.Random(5), 60, 20)
    tr_none, te_none = code_tasks(random.Random(5), 60, 20, NameBank(random.Random(6)), 0.0)
    assert [t.instruction for t in tr0 + te0] == [t.instruction for t in tr_none + te_none]

    tr, te = code_tasks(random.Random(5), 60, 20, NameBank(random.Random(6)), 1.0)
    assert all(t.metadata["entry_point"] not in known for t in tr)
    assert all(t.metadata["entry_point"].isidentifier() for t in tr)
    assert not _variants(tr) & _variants(te)
    # test tasks keep the known held-out names: none is a variant the train split uses
    assert all(t.metadata["entry_point"] in known for t in te)
    assert not _variants(te) & _variants(tr0)
    for t in tr[:10]:
        name = t.metadata["entry_point"]
        assert f"`{name}(" in t.instruction and f"def {name}(" in t.metadata["solution"]
        assert _passes(t)

    half, _ = code_tasks(random.Random(5), 60, 20, NameBank(random.Random(6)), 0.5)
    made_up = sum(t.metadata["entry_point"] not in known for t in half)
    assert 15 <= made_up <= 45


def test_fresh_code_tasks_never_use_a_held_out_variant():
    from arcforge.world import WorldConfig, build_world

    world = build_world(WorldConfig(seed=7, scale=0.1, code_fresh_names=0.5))
    train, test = world.tasks("code", "train"), world.tasks("code", "test")
    fresh = world.tasks("code", "dev") + world.tasks("code", "fresh")
    assert len(fresh) >= 20 and not _variants(fresh) & _variants(test)
    assert {t.metadata["template"] for t in fresh} <= {t.metadata["template"] for t in train}
    known = {n for t in TEMPLATES for n in t.names}
    made_up = [t for t in fresh if t.metadata["entry_point"] not in known]
    assert _variants(made_up) - _variants(train)  # names of its own besides the train's
    assert all(_passes(t) for t in made_up[:5])


def test_tasks_show_the_stub_and_its_body_completes_it():
    tr, te = code_tasks(random.Random(3), 30, 10, NameBank(random.Random(4)), 0.5)
    for t in tr + te:
        name, stub = t.metadata["entry_point"], t.context["stub"]
        assert stub.startswith(f"def {name}(") and stub.count("\n") == 2
        assert t.instruction.endswith(f"```python\n{stub}```")  # the stub ends the prompt
        assert stub + t.metadata["body"] == t.metadata["solution"]
        assert t.metadata["body"].startswith("    ") and f"def {name}(" not in t.metadata["body"]
