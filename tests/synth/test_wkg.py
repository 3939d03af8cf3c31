"""Web knowledge graph: rule extraction per layout, the LLM extractor over real HTTP (replay
server), evidence, frequencies, conflicts, and a check of the rules against the world's KB."""

from collections import Counter

import pytest

from arcforge.llm import LLMClient
from arcforge.replay import ReplayServer
from arcforge.synth.wkg import (
    Fact,
    WebGraph,
    build_graph,
    extract_llm,
    extract_rules,
    score_against,
)

INFOBOX = (
    "p1",
    "Vrystad",
    "Vrystad\ntype: city\nlocated in: Hooeiia\npopulation: 823000\n\n"
    "Related:\nZheou Thaeary lives in Vrystad.",
)
TABLE = (
    "p2",
    "Num",
    "Num\n| field | value |\n|---|---|\n| located in | Hooeiia |\n"
    "| headquartered in (of Kredria Studios) | Num |",
)
LIST = ("p3", "People born in Num", "People born in Num:\n- Ada Brill\n- Cor Dane")
PROSE = (
    "p4",
    "Ada Brill",
    "Ada Brill\n\nAda Brill (born 1950 in Num) is a pilot who lives in "
    "Vrystad. Ada works for Kredria Studios. For background: Num is located in Hooeiia.",
)


def test_rules_read_each_layout_with_page_evidence():
    facts, residue = extract_rules(INFOBOX)
    assert {f.triple for f in facts} == {
        ("Vrystad", "located_in", "Hooeiia"),
        ("Vrystad", "population", "823000"),
        ("Zheou Thaeary", "lives_in", "Vrystad"),
    }
    assert {f.page for f in facts} == {"p1"} and residue == []
    assert {f.triple for f in extract_rules(TABLE)[0]} == {
        ("Num", "located_in", "Hooeiia"),
        ("Kredria Studios", "headquartered_in", "Num"),
    }
    assert {f.triple for f in extract_rules(LIST)[0]} == {
        ("Ada Brill", "born_in", "Num"),
        ("Cor Dane", "born_in", "Num"),
    }


def test_rules_resolve_first_names_and_leave_free_text_as_residue():
    facts, residue = extract_rules(PROSE)
    # "Ada works for" -> the page's subject; "For background:" lead-in skipped
    assert {f.triple for f in facts} == {
        ("Ada Brill", "works_for", "Kredria Studios"),
        ("Num", "located_in", "Hooeiia"),
    }
    assert residue == ["Ada Brill (born 1950 in Num) is a pilot who lives in Vrystad."]


def test_llm_extractor_keeps_only_grounded_known_facts():
    reply = (
        '```json\n{"triples": [["Ada Brill", "born in", "Num"], ["Ada Brill", "born_year", '
        '"1950"], ["Ada Brill", "lives_in", "Paris"], ["Ada Brill", "likes", "tea"], '
        '["bad"]]}\n```'
    )
    counts = Counter()
    with ReplayServer([reply]) as srv:
        facts = extract_llm([PROSE], LLMClient(srv.base_url, "m"), counts)
        sent = srv.requests[0]["messages"][1]["content"]
    assert "Ada Brill (born 1950 in Num)" in sent  # the page text went to the model
    assert {f.triple for f in facts} == {
        ("Ada Brill", "born_in", "Num"),
        ("Ada Brill", "born_year", "1950"),
    }
    assert all(f.extractor == "llm" and f.page == "p4" for f in facts)
    # Paris is not on the page; "likes" is no relation; ["bad"] is not a triple
    assert counts == Counter(llm_kept=2, llm_ungrounded=1, llm_unknown_relation=1, llm_malformed=1)


def test_graph_counts_evidence_frequency_and_conflicts(tmp_path):
    extra = ("p5", "Num news", "Num news\n\nNum is located in Stemaria.")  # a conflicting page
    counts = Counter()
    g = build_graph([INFOBOX, TABLE, LIST, PROSE, extra], counts=counts)
    assert counts["pages"] == 5 and counts["free_text_pages"] == 1  # only the prose page
    assert g.evidence[("Num", "located_in", "Hooeiia")] == ["p2", "p4"]
    assert g.freq["Num"] == 4  # p2, p3, p4, p5 mention Num in a fact
    assert g.types["Kredria Studios"] == "org" and g.types["Num"] == "city"
    assert g.conflicts() == [("Num", "located_in", ["Hooeiia", "Stemaria"])]
    g.save(tmp_path / "wkg.jsonl")
    assert WebGraph.load(tmp_path / "wkg.jsonl").evidence == g.evidence


def test_build_graph_sends_only_free_text_pages_to_the_llm():
    with ReplayServer(lambda msgs: '{"triples": []}') as srv:
        build_graph([INFOBOX, TABLE, PROSE], client=LLMClient(srv.base_url, "m"))
        assert len(srv.requests) == 1
        assert "Ada Brill" in srv.requests[0]["messages"][1]["content"]


def test_rules_on_the_world_are_exact_and_cover_most_facts(world):
    g = build_graph(world.pages)
    truth = [(t.subject, t.relation, t.object) for t in world.kb.triples]
    score = score_against(g, truth)
    assert score["precision"] == 1.0  # the world is consistent: any wrong triple is a bug
    assert score["recall"] > 0.85  # the rest hides in prose heads (the LLM extractor's job)
    assert g.conflicts() == []


def test_bad_wkg_file_is_a_user_error(tmp_path):
    from arcforge.errors import UserError

    (tmp_path / "w.jsonl").write_text('{"subject": "a"}\n')
    with pytest.raises(UserError, match="w.jsonl:1"):
        WebGraph.load(tmp_path / "w.jsonl")
    assert Fact("a", "born_in", "b", "p").triple == ("a", "born_in", "b")
