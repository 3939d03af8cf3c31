"""Corpus mixture: domains, injected junk and near-duplicates with honest labels."""

from collections import Counter

from arcforge.world import WorldConfig, build_world


def _shingles(text: str, k: int = 3) -> set[tuple[str, ...]]:
    w = text.split()
    return {tuple(w[i : i + k]) for i in range(max(1, len(w) - k + 1))}


def test_domains_and_ratios(world):
    chars = Counter()
    for d in world.corpus():
        chars[d.domain] += len(d.text)
    total = sum(chars.values())
    assert set(chars) == {"web", "code", "math", "junk"}
    # advertised: web ~50%, code ~20%, math ~30% of clean text; junk ~5%
    assert 0.35 < chars["web"] / total < 0.65
    assert 0.10 < chars["code"] / total < 0.35
    assert 0.15 < chars["math"] / total < 0.40
    assert 0.02 < chars["junk"] / total < 0.10


def test_junk_is_junk(world):
    junk = [d for d in world.corpus() if d.domain == "junk"]
    assert len(junk) >= 3
    for d in junk:
        words = d.text.split()
        # soup has few real words, spam repeats one line, near-empty has almost nothing
        repeated = len(set(d.text.splitlines())) == 1 and len(d.text.splitlines()) >= 10
        assert len(d.text) < 20 or repeated or sum(w.isalpha() for w in words) < len(words) / 2


def test_near_duplicates_point_at_similar_originals(world):
    docs = {d.id: d for d in world.corpus()}
    dups = [d for d in docs.values() if d.dup_of]
    assert len(dups) >= 3
    for d in dups:
        orig = docs[d.dup_of]
        assert orig.dup_of is None and orig.domain == d.domain and d.text != orig.text
        a, b = _shingles(d.text), _shingles(orig.text)
        assert len(a & b) / len(a | b) > 0.5


def test_default_size_is_megabytes():
    # scale 0.3 of the default: linear scaling puts the default at several MB
    w = build_world(WorldConfig(seed=0, scale=0.3))
    total = sum(len(d.text) for d in w.corpus())
    assert 0.6e6 < total < 2.5e6, total
