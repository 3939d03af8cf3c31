"""SearchEnv: bm25s retrieval over a corpus, paginated open, answer ends, EM reward + F1."""

import pytest

from arcforge.envs.registry import make_env, world_index
from arcforge.envs.search_env import SearchEnv, SearchIndex, normalize_answer, paginate, token_f1
from arcforge.types import Message, Task, ToolCall, Validation
from arcforge.world import WorldConfig, build_world

CORPUS = [
    ("d1", "Paris", "Paris is the capital of France.\nIt lies on the Seine."),
    ("d2", "Lyon", "Lyon is a city in France known for food."),
    ("d3", "Berlin", "Berlin is the capital of Germany.\n" + "More history. " * 40),
]
TASK = Task("s-1", "search", "What is the capital of France?", validation=Validation("Paris"))


def _call(name, **args):
    return Message("assistant", "", tool_calls=[ToolCall(name, args)])


@pytest.fixture
def env():
    e = SearchEnv(SearchIndex(CORPUS), top_k=2, page_chars=120)
    e.reset(TASK)
    return e


def test_tools_and_schemas(env):
    assert [t.name for t in env.tools] == ["search", "open", "answer"]
    open_schema = env.tools[1].parameters
    assert open_schema["properties"]["page"]["type"] == "integer"
    assert open_schema["required"] == ["doc_id"]


def test_search_ranks_by_bm25_and_shows_ids_titles_snippets(env):
    text = env.step(_call("search", query="capital of Germany")).observations[0].content
    lines = text.splitlines()
    assert len(lines) == 2  # top_k
    assert lines[0].startswith("1. [d3] Berlin: Berlin is the capital of Germany.")
    assert (
        "no results" in env.step(_call("search", query="zebra xylophone")).observations[0].content
    )


def test_open_paginates_and_reports_bad_ids(env):
    first = env.step(_call("open", doc_id="d3")).observations[0].content
    assert first.startswith("[d3] Berlin (page 0; pages 0-")
    n_pages = len(paginate(CORPUS[2][2], 120))
    assert n_pages > 2 and f"pages 0-{n_pages - 1}" in first
    second = env.step(_call("open", doc_id="[d3]", page=1)).observations[0].content
    assert "(page 1;" in second and second.split("\n", 1)[1] == paginate(CORPUS[2][2], 120)[1]
    assert env.step(_call("open", doc_id="d9")).observations[0].content.startswith("error: no doc")
    bad = env.step(_call("open", doc_id="d3", page=99)).observations[0].content
    assert bad.startswith("error: page 99 out of range")


def test_exact_title_comes_first():
    # BM25 alone ranks "Seine boats" (four mentions) above the page titled "Seine"
    idx = SearchIndex(
        CORPUS
        + [
            ("d4", "Seine", "A river."),
            ("d5", "Seine boats", "Seine Seine Seine boats on the Seine."),
        ]
    )
    assert [d.id for d, _ in idx.search("seine", 3)][0] == "d4"  # exact title, lowest BM25
    assert [d.id for d, _ in idx.search("Seine boats", 3)][0] == "d5"
    assert [d.id for d, _ in idx.search("river", 3)] == ["d4"]  # no title match: BM25 only


def test_open_takes_a_result_number_of_the_latest_search(env):
    err = env.step(_call("open", doc_id=1)).observations[0].content
    assert err.startswith("error: no result number 1") and "search first" in err
    env.step(_call("search", query="capital of Germany"))  # 1. d3 Berlin, 2. d1 Paris
    assert env.step(_call("open", doc_id=1)).observations[0].content.startswith("[d3] Berlin")
    assert env.step(_call("open", doc_id="2")).observations[0].content.startswith("[d1] Paris")
    bad = env.step(_call("open", doc_id=3)).observations[0].content
    assert bad.startswith("error: no result number 3") and "1 to 2" in bad
    env.step(_call("search", query="Lyon"))
    assert env.step(_call("open", doc_id=1)).observations[0].content.startswith("[d2] Lyon")


def test_paginate_keeps_every_character():
    text = "short line\n" + "x" * 250 + "\nend"
    pages = paginate(text, 100)
    assert "".join(pages) == text and all(len(p) <= 100 for p in pages)


def test_answer_ends_episode_and_is_normalized(env):
    step = env.step(_call("answer", text="The Paris."))
    assert step.done
    reward = env.verify()
    assert reward.score == 1.0 and reward.details["f1"] == 1.0


def test_wrong_answer_gets_zero_with_partial_f1(env):
    env.step(_call("search", query="France"))
    env.step(_call("answer", text="Paris Lyon"))
    reward = env.verify()
    assert reward.score == 0.0
    assert reward.details["f1"] == pytest.approx(2 / 3)  # p = 1/2, r = 1 -> F1 = 2/3
    assert reward.details["searches"] == 1


def test_plain_reply_is_the_answer(env):
    assert env.step(Message("assistant", "Answer: Paris")).done
    assert env.verify().score == 1.0


def test_helpers():
    assert normalize_answer("  The  Eiffel-Tower! ") == "eiffeltower"
    assert token_f1("new york city", "New York") == pytest.approx(0.8)  # p 2/3, r 1


def test_world_pages_index_finds_entity_pages_and_is_cached():
    world = build_world(WorldConfig(seed=7, scale=0.1))
    index = world_index(world)
    assert world_index(world) is index
    task = world.tasks("search")[0]
    e1, e2 = make_env(task, world), make_env(task, world)
    assert e1.index is index and e2.index is index
    subject = task.metadata["path"][0][0]
    hits = index.search(subject, k=3)
    assert hits[0][0].title == subject
    assert hits[0][0].id == task.metadata["evidence"][0]


def test_any_corpus_through_the_registry():
    env = make_env(TASK, corpus=CORPUS, top_k=1)
    env.reset(TASK)
    out = env.step(_call("search", query="Lyon food")).observations[0].content
    assert out.startswith("1. [d2] Lyon") and len(out.splitlines()) == 1


def test_snippets_show_the_line_with_the_query_words_outside_the_title():
    """A name + relation query shows that entity's page first, with the fact's line as its
    snippet (not the page's opening); a query of the title alone shows the opening."""
    page = (
        "Ada Lovelace\ntype: person\nborn year: 1815\nborn in: London\nlives in: Marylebone\n"
        "\nRelated:\nThe Engine Notes was created by Ada Lovelace."
    )
    prose = (
        "Boole Labs\n\nBoole Labs is a software company founded in 1931 by Ada Lovelace. "
        "Its headquarters are in Lincoln."
    )
    env = SearchEnv(
        SearchIndex(
            [
                ("p1", "Ada Lovelace", page),
                ("p2", "Boole Labs", prose),
                ("p3", "London", "London is located in England.\n" * 3),
            ]
        )
    )
    env.reset(TASK)
    first = env.search("Ada Lovelace born in").splitlines()[0]
    assert first == "1. [p1] Ada Lovelace: born in: London"  # not "born year", not "lives in"
    assert (
        env.search("Boole Labs headquartered in")
        .splitlines()[0]
        .endswith("Its headquarters are in Lincoln.")
    )  # "headquartered" meets "headquarters"; the sentence, not the whole line
    assert "founded in 1931 by Ada Lovelace" in env.search("Boole Labs founded by")
    assert (
        env.search("Ada Lovelace")
        .splitlines()[0]
        .startswith("1. [p1] Ada Lovelace: Ada Lovelace type: person born year")
    )  # the title alone: the opening


def test_a_query_that_starts_with_a_title_ranks_that_page_first():
    idx = SearchIndex(
        CORPUS + [("d4", "Seine", "A river."), ("d5", "Seine boats", "Seine Seine boats Seine.")]
    )
    assert [d.id for d, _ in idx.search("Seine boats tours", 3)][0] == "d5"  # longest prefix
    assert [d.id for d, _ in idx.search("seine length", 3)][0] == "d4"
    assert "d4" not in [d.id for d, _ in idx.search("boats of the Seine", 1)]  # BM25 only
