"""Curation on a synthetic corpus with planted junk and planted near duplicates."""

from __future__ import annotations

import random

from arcforge.data.curate import (
    CurationConfig,
    curate,
    find_near_duplicates,
    junk_reason,
    quality_signals,
    shingles,
)

SYLL = ["ka", "lo", "mi", "ren", "tu", "sa", "vel", "or", "an", "dri", "pe", "qua", "zon", "il"]


def _vocab(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(SYLL) for _ in range(rng.randint(1, 3))) for _ in range(n)]


def _clean_doc(rng: random.Random, vocab: list[str]) -> str:
    sents = []
    for _ in range(rng.randint(5, 9)):
        words = [rng.choice(vocab) for _ in range(rng.randint(6, 14))]
        sents.append(" ".join(words).capitalize() + ".")
    return " ".join(sents)


def _edit(rng: random.Random, text: str, vocab: list[str], n_edits: int) -> str:
    words = text.split(" ")
    for _ in range(n_edits):
        i = rng.randrange(len(words))
        op = rng.choice(["sub", "ins", "del"])
        if op == "sub":
            words[i] = rng.choice(vocab)
        elif op == "ins":
            words.insert(i, rng.choice(vocab))
        else:
            del words[i]
    return " ".join(words)


CODE = (
    "def add(a, b):\n    return a + b\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    "    assert add(-1, 1) == 0\n"
)
MATH = "Question: Ana has 12 apples and buys 30 more. Reasoning: 12 + 30 = 42. Answer: 42"
JUNK = {
    "junk:short": ["ok thanks", "Click here.", ""],
    "junk:symbols": ["@@## $$%% ^^&& **(( )){{ }}|| ~~`` <<>> !!?? @@## $$%% ^^&& **((" * 2],
    "junk:gibberish": [
        "xqzkvbnmlkjhgfdsapoiuytrewq mnbvcxzlkjhgfdsaqwertyuiop zxcvbnmasdfghjklqwertyuiopas "
        "qwertyuiopasdfghjklzxcvbnm plokmijnuhbygvtfcrdxeszwaq",
    ],
    "junk:repetition": [
        "buy cheap pills now " * 20,
        "\n".join(["Subscribe to our newsletter today!"] * 6 + ["Fresh news every day here."]),
    ],
}


def _corpus(seed: int = 0):
    rng = random.Random(seed)
    vocab = _vocab(rng, 400)
    clean = [_clean_doc(rng, vocab) for _ in range(120)] + [CODE, MATH]
    planted = {}  # index in corpus -> index of its original
    docs = list(clean)
    for j in rng.sample(range(120), 30):
        planted[len(docs)] = j
        docs.append(_edit(rng, clean[j], vocab, n_edits=rng.randint(1, 3)))
    planted[len(docs)] = 5  # an exact copy
    docs.append(clean[5])
    n_junk = {}
    for reason, texts in JUNK.items():
        n_junk[reason] = len(texts)
        docs.extend(texts)
    return docs, clean, planted, n_junk


def test_signals_by_hand():
    s = quality_signals("ab cd!\nab cd!\nxyz xyz xyz xyz")
    # non-space chars: "abcd!" x2 + "xyz" x4 = 22; symbols "!" x2 -> 2/22; alpha 20/22.
    assert abs(s.symbol_frac - 2 / 22) < 1e-9 and abs(s.alpha_frac - 20 / 22) < 1e-9
    # words: ab cd ab cd xyz xyz xyz xyz -> mean len (2*4 + 3*4) / 8 = 2.5
    assert s.mean_word_len == 2.5
    # lines of >= 8 chars: "xyz xyz xyz xyz" only ("ab cd!" is 6) -> no duplicates.
    assert s.dup_line_frac == 0.0
    # 3-grams: (ab,cd,ab) (cd,ab,cd) (ab,cd,xyz) (cd,xyz,xyz) (xyz,xyz,xyz) x2 -> 2 of 6 repeat.
    assert abs(s.dup_ngram_frac - 2 / 6) < 1e-9


def test_code_and_math_are_not_junk():
    assert junk_reason(CODE) is None
    assert junk_reason(MATH) is None


def test_each_junk_kind_gets_its_reason():
    for reason, texts in JUNK.items():
        for t in texts:
            assert junk_reason(t) == reason, t[:40]


def test_shingles():
    assert shingles("A b c D", 3) == {"a b c", "b c d"}
    assert shingles("one two", 3) == {"one two"}


def test_curate_counts_match_planted():
    docs, clean, planted, n_junk = _corpus()
    kept, report = curate(docs)
    counts = report.counts
    for reason, n in n_junk.items():
        assert counts[reason] == n
    flagged = {i for i, r in report.reasons.items() if r == "near_duplicate"}
    recall = len(flagged & set(planted)) / len(planted)
    assert recall >= 0.9
    # No clean original is dropped, and every flagged duplicate points at its own original.
    assert not flagged & set(range(len(clean)))
    assert all(report.duplicate_of[i] == planted[i] for i in flagged)
    assert report.n_kept == len(kept) == len(docs) - sum(counts.values())
    assert report.to_dict()["dropped"] == counts


def test_curate_accepts_doc_objects_and_keeps_order():
    class Doc:
        def __init__(self, text: str):
            self.text = text

    docs, clean, _, _ = _corpus(seed=1)
    objs = [Doc(t) for t in docs]
    kept, report = curate(objs)
    assert [d.text for d in kept[: len(clean)]] == clean  # originals first, in order
    no_dedup, r2 = curate(objs, CurationConfig(dedup=False))
    assert "near_duplicate" not in r2.counts and len(no_dedup) > len(kept)


def test_find_near_duplicates_threshold():
    base = " ".join(f"w{i}" for i in range(40))
    far = " ".join(f"w{i}" for i in range(20)) + " " + " ".join(f"z{i}" for i in range(20))
    # 3-shingles: base 38, far shares 18 of them -> Jaccard 18 / 58 = 0.31 < 0.7.
    assert find_near_duplicates([base, far]) == {}
    assert find_near_duplicates([base, base.replace("w7 ", "q7 ")]) == {1: 0}  # J = 35/41
