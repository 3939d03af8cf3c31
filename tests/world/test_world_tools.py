"""World tools answer consistently with the KB; errors are strings naming the problem."""

from arcforge.world import calculate


def test_lookup_matches_kb(world):
    lookup = world.tools()["lookup"].fn
    for t in world.kb.triples[::7]:
        assert lookup(t.subject, t.relation) == t.object
        assert lookup(t.subject.lower(), t.relation) == t.object  # case-insensitive names


def test_lookup_errors(world):
    lookup = world.tools()["lookup"].fn
    out = lookup("Nobody Atall", "born_in")
    assert out.startswith("error:") and "Nobody Atall" in out
    person = world.kb.of_type("person")[0].name
    out = lookup(person, "birthplace")
    assert out.startswith("error:") and "birthplace" in out and "born_in" in out


def test_unknown_entity_suggests_the_closest_known_names(world):
    lookup = world.tools()["lookup"].fn
    names = [e.name for e in world.kb.of_type("person")][:20]
    for name in names:
        typo = name[:2] + name[3:]  # one letter dropped
        out = lookup(typo, "born_in")
        assert out.startswith(f"error: unknown entity {typo!r}; did you mean "), out
        shown = out.split("did you mean ", 1)[1].rstrip("?")
        assert repr(name) in shown, (typo, out)  # the real name is offered...
        assert shown.count("'") <= 6  # ...among at most three
        # and a repaired call goes through
        assert not lookup(name, "born_in").startswith("error:")
    out = lookup("Zzqx Wvvq", "born_in")  # nothing close: no guesses
    assert out == "error: unknown entity 'Zzqx Wvvq'; check the spelling of the name"


def test_calculator_is_safe_and_correct():
    assert calculate("(23 + 45) * 3") == "204"
    assert calculate("7 / 2") == "3.5"
    assert calculate("1 / 0").startswith("error:")
    assert calculate("__import__('os').system('echo hi')").startswith("error:")
    assert calculate("2 ** 100000").startswith("error:")


def test_search_and_open_page(world):
    tools = world.tools()
    entity = world.kb.of_type("org")[0].name
    out = tools["search"].fn(entity)
    first = out.splitlines()[0]
    page = next(p for p in world.pages if p.title == entity)
    assert first == f"1. [{page.id}] {entity}"
    assert len(out.splitlines()) <= 3
    assert tools["open_page"].fn(page.id) == page.text
    assert tools["search"].fn("zzqqxx").startswith("no results")


def test_tool_schemas(world):
    tools = world.tools()
    assert {"lookup", "calculator", "search", "open_page"} <= set(tools)
    params = tools["lookup"].parameters
    assert params["required"] == ["entity", "relation"]
    assert params["properties"]["entity"]["type"] == "string"


def test_tool_and_search_tasks_are_answerable_by_their_oracle_calls(world):
    tools = world.tools()
    for t in world.tasks("tool", "test") + world.tasks("search", "test"):
        result = None
        for call in t.metadata["calls"]:
            result = tools[call["name"]].fn(**call["arguments"])
        assert result == t.validation.answer, t.instruction


def test_search_hops_option_sets_each_question_hop_count(world):
    import random

    import pytest

    from arcforge.world.tasks.pools import search_tasks

    train, test = search_tasks(random.Random(5), world.kb, world.pages, 60, 30, [1, 3])
    hops = [t.metadata["hops"] for t in train + test]
    assert set(hops) == {1, 3}  # both drawn, nothing else
    assert all(len(t.metadata["path"]) == t.metadata["hops"] for t in train + test)
    one = next(t for t in train if t.metadata["hops"] == 1)
    assert one.validation.answer == one.metadata["path"][0][2]
    with pytest.raises(ValueError, match="search hops"):
        search_tasks(random.Random(5), world.kb, world.pages, 4, 2, [0, 2])
