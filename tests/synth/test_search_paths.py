"""Graph checks and query evolution on a hand-built web knowledge graph (answers by hand)."""

import random

from arcforge.synth.search import consistency_problem, evidence_problem
from arcforge.synth.search_paths import (
    Constraint,
    Draft,
    Hop,
    answer_set,
    indirect,
    inject_uncertainty,
    is_unique,
    obfuscate,
    remove_salient,
    render,
    sample_backward,
)
from arcforge.synth.wkg import Fact, WebGraph, build_graph

PAGES = [
    (
        "a",
        "Ada Brill",
        "Facts about Ada Brill:\n- Ada Brill works for Kredria Studios.\n"
        "- Ada Brill was born in Num.\n- Ada Brill was born in the year 1950.\n"
        "- Ada Brill works as pilot.",
    ),
    (
        "c",
        "Cor Dane",
        "Facts about Cor Dane:\n- Cor Dane works for Yooth Labs.\n"
        "- Cor Dane was born in Num.\n- Cor Dane was born in the year 1972.\n"
        "- Cor Dane works as baker.",
    ),
    (
        "k",
        "Kredria Studios",
        "Facts about Kredria Studios:\n- Kredria Studios is headquartered in Vrystad.",
    ),
    ("y", "Yooth Labs", "Facts about Yooth Labs:\n- Yooth Labs is headquartered in Num."),
    (
        "v",
        "Vrystad",
        "Facts about Vrystad:\n- Vrystad is located in Hooeiia.\n"
        "- Vrystad has a population of 823000.",
    ),
    (
        "n",
        "Num",
        "Facts about Num:\n- Num is located in Hooeiia.\n- Num has a population of 87000.",
    ),
]
G = build_graph(PAGES)
TEXTS = {p[0]: p[2] for p in PAGES}
# Ada -works_for-> Kredria Studios -headquartered_in-> Vrystad
ADA = Draft(
    ["Ada Brill", "Kredria Studios", "Vrystad"], [Hop("works_for"), Hop("headquartered_in")]
)


def test_forward_path_is_unique_and_inverse_hop_is_not():
    assert answer_set(G, ADA) == {"Vrystad"} and is_unique(G, ADA)
    # "Which person was born in Num?" -> Ada and Cor
    born = Draft(["Num", "Ada Brill"], [Hop("born_in", inverse=True)])
    assert answer_set(G, born) == {"Ada Brill", "Cor Dane"} and not is_unique(G, born)
    assert render(G, born) == "Which person was born in Num?"


def test_backward_sampling_takes_only_functional_or_unique_hops():
    rng = random.Random(0)
    drafts = [sample_backward(G, rng, "Hooeiia", 2, ambiguous_prob=0.0) for _ in range(30)]
    for d in filter(None, drafts):
        assert d.answer == "Hooeiia" and len(d.hops) == 2 and is_unique(G, d)
    assert any(d is not None for d in drafts)


def test_indirect_then_remove_salient_then_obfuscate_keep_uniqueness():
    d = indirect(G, ADA)
    # Ada's facts except the first hop's relation, most selective first: year, job, birthplace
    assert d.start_desc == [
        Constraint("born_year", "1950"),
        Constraint("occupation", "pilot"),
        Constraint("born_in", "Num"),
    ]
    d = remove_salient(G, d)
    assert d.start_desc == [Constraint("occupation", "pilot"), Constraint("born_in", "Num")]
    d = indirect(G, ADA)
    d = obfuscate(G, d)
    assert Constraint("born_year", "1950", "decade") in d.start_desc
    assert d.ops == ["indirect", "obfuscate"] and is_unique(G, d)
    assert "the pilot born in the 1950s" in render(G, d)


def test_uncertainty_makes_the_start_a_set_and_pins_the_answer():
    d = inject_uncertainty(G, ADA, random.Random(0))
    # "born in Num" fits Ada and Cor -> {Vrystad, Num}; Vrystad's population separates them
    assert d.start_desc == [Constraint("born_in", "Num")]
    assert answer_set(G, Draft(d.nodes, d.hops, d.start_desc)) == {"Vrystad", "Num"}
    assert d.answer_desc == [Constraint("population", "823000")]  # most selective answer fact
    assert is_unique(G, d)
    blurred = obfuscate(G, d)
    assert blurred.answer_desc[-1] == Constraint("population", "820000", "approx")


def test_evidence_closure_and_cross_page_consistency():
    assert evidence_problem(G, TEXTS, ADA) is None
    assert consistency_problem(G, ADA) is None
    # a fact whose only page does not contain it: no evidence
    lying = WebGraph([*G.facts, Fact("Kredria Studios", "headquartered_in", "Vrystad", "x")])
    assert evidence_problem(lying, {**TEXTS, "x": "nothing here"}, ADA) is None  # page k backs it
    orphan = WebGraph(
        [f for f in G.facts if f.page != "k"]
        + [Fact("Kredria Studios", "headquartered_in", "Vrystad", "x")]
    )
    assert evidence_problem(orphan, {**TEXTS, "x": "nothing here"}, ADA) == "no_evidence"
    # another page says Kredria Studios is headquartered in Num: a conflict on a hop
    news = build_graph([*PAGES, ("z", "News", "News\n\nKredria Studios is headquartered in Num.")])
    assert consistency_problem(news, ADA) == "conflict"
