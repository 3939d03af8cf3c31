"""Code tasks: one distinct function per item, held-out items from held-out functions only,
and made-up train names (code_fresh_names)."""

import random

from arcforge.world.code.codelib import CodeSpace, load_source
from arcforge.world.knowledge.names import NameBank
from arcforge.world.tasks.pools import code_tasks

SPACE = CodeSpace.build(5, 400, 120)


def _passes(task) -> bool:
    ns = load_source(task.metadata["solution"])
    tests = task.validation.tests.split("\n", 1)[1]  # drop `from solution import ...`
    exec(tests, ns)  # noqa: S102 - our own generated tests
    for name, fn in list(ns.items()):
        if name.startswith("test_"):
            fn()
    return True


def test_items_are_distinct_functions_and_held_out_ones_come_from_the_held_out_part():
    tr, te = code_tasks(random.Random(5), SPACE, 60, 20)
    train_keys = {t.key for t in SPACE.train}
    test_keys = {t.key for t in SPACE.test}
    assert len({t.metadata["template"] for t in tr}) == 60
    assert len({t.metadata["template"] for t in te}) == 20
    assert {t.metadata["template"] for t in tr} <= train_keys
    assert {t.metadata["template"] for t in te} <= test_keys
    assert not {t.metadata["structure"] for t in tr} & {t.metadata["structure"] for t in te}
    assert all(_passes(t) for t in tr[:10] + te[:10])


def test_fresh_names_are_made_up_and_leave_the_held_out_items_alone():
    tr0, te0 = code_tasks(random.Random(5), SPACE, 60, 20)
    tr_none, te_none = code_tasks(random.Random(5), SPACE, 60, 20, NameBank(random.Random(6)), 0.0)
    assert [t.instruction for t in tr0 + te0] == [t.instruction for t in tr_none + te_none]
    known = {n for t in SPACE.train + SPACE.test for n in t.names}
    tr, te = code_tasks(random.Random(5), SPACE, 60, 20, NameBank(random.Random(6)), 1.0)
    assert all(t.metadata["entry_point"] not in known for t in tr)
    assert all(t.metadata["entry_point"].isidentifier() for t in tr)
    assert all(t.metadata["entry_point"] in known for t in te)
    for t in tr[:10]:
        name = t.metadata["entry_point"]
        assert f"`{name}(" in t.instruction and f"def {name}(" in t.metadata["solution"]
        assert _passes(t)
    half, _ = code_tasks(random.Random(5), SPACE, 60, 20, NameBank(random.Random(6)), 0.5)
    made_up = sum(t.metadata["entry_point"] not in known for t in half)
    assert 15 <= made_up <= 45


def test_fresh_code_tasks_never_use_a_held_out_function():
    from arcforge.world import WorldConfig, build_world

    world = build_world(WorldConfig(seed=7, scale=0.1, code_fresh_names=0.5))
    test = world.tasks("code", "test")
    fresh = world.tasks("code", "dev") + world.tasks("code", "fresh")
    assert len(fresh) >= 20
    held = {t.metadata["structure"] for t in test}
    assert not {t.metadata["structure"] for t in fresh} & held
    assert all(_passes(t) for t in fresh[:5])


def test_tasks_show_the_stub_and_its_body_completes_it():
    tr, te = code_tasks(random.Random(3), SPACE, 30, 10, NameBank(random.Random(4)), 0.5)
    for t in tr + te:
        name, stub = t.metadata["entry_point"], t.context["stub"]
        assert stub.startswith(f"def {name}(") and stub.count("\n") == 2
        assert t.instruction.endswith(f"```python\n{stub}```")  # the stub ends the prompt
        assert stub + t.metadata["body"] == t.metadata["solution"]
        assert t.metadata["body"].startswith("    ") and f"def {name}(" not in t.metadata["body"]
