"""Pretraining corpus curation: heuristic quality filter, then MinHash-LSH near-duplicate removal.

Quality (the Gopher/C4 style rules, thresholds in `CurationConfig`); the first rule a document
breaks, in this order, is its drop reason:
    junk:short        fewer than `min_chars` characters
    junk:symbols      too many characters that are neither alphanumeric nor whitespace, or too
                      few alphabetic ones (code and worked arithmetic stay well inside both)
    junk:gibberish    mean word length outside [min, max] (keyboard mash, base64 blobs)
    junk:short        fewer than `min_words` words (checked after the two above, which also
                      produce few "words")
    junk:repetition   many repeated lines, or most word 3-grams occurring more than once
Near duplicates: each surviving document becomes a MinHash of its word `shingle`-grams
(datasketch); an LSH index at `lsh_threshold` (below `dup_threshold`, so that pairs near the
threshold are not lost to MinHash noise) proposes candidates among the documents kept so far,
and a candidate counts only if the exact Jaccard similarity of the shingle sets reaches
`dup_threshold` (LSH alone has false positives and false negatives). The first occurrence is kept, later ones are dropped
as `near_duplicate`. Exact copies are near duplicates with similarity 1.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from datasketch import MinHash, MinHashLSH

T = TypeVar("T")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class CurationConfig:
    """Thresholds of the quality rules and of deduplication."""

    min_words: int = 8
    min_chars: int = 40
    max_symbol_frac: float = 0.4  # of non-space chars: neither alphanumeric nor space
    min_alpha_frac: float = 0.25  # of non-space chars: alphabetic
    min_mean_word_len: float = 1.5
    max_mean_word_len: float = 14.0
    max_dup_line_frac: float = 0.3  # of lines with >= 8 chars: copies of an earlier line
    max_dup_ngram_frac: float = 0.5  # of word 3-grams: occurring more than once
    dedup: bool = True
    dup_threshold: float = 0.7  # exact Jaccard of shingle sets that makes a duplicate
    lsh_threshold: float = 0.5  # LSH candidate threshold, lower: MinHash estimates are noisy
    shingle: int = 3
    num_perm: int = 128
    seed: int = 1


@dataclass(frozen=True)
class QualitySignals:
    """Per-document statistics the quality rules read."""

    n_chars: int
    n_words: int
    symbol_frac: float
    alpha_frac: float
    mean_word_len: float
    dup_line_frac: float
    dup_ngram_frac: float


@dataclass
class CurationReport:
    """What curation did. `reasons[i]` is the drop reason of input i (absent when kept);
    `duplicate_of[i]` is the kept document that input i duplicates."""

    n_in: int = 0
    n_kept: int = 0
    reasons: dict[int, str] = field(default_factory=dict)
    duplicate_of: dict[int, int] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """Number of dropped documents per reason, e.g. {"junk:short": 3, "near_duplicate": 5}."""
        return dict(sorted(Counter(self.reasons.values()).items()))

    def to_dict(self) -> dict[str, Any]:
        return {"n_in": self.n_in, "n_kept": self.n_kept, "dropped": self.counts}


def quality_signals(text: str) -> QualitySignals:
    """Compute the statistics of one document."""
    words = _WORD.findall(text)
    non_space = [c for c in text if not c.isspace()]
    n_ns = max(len(non_space), 1)
    symbols = sum(1 for c in non_space if not c.isalnum())
    alpha = sum(1 for c in non_space if c.isalpha())
    lines = [ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 8]
    dup_lines = len(lines) - len(set(lines))
    lower = [w.lower() for w in words]
    grams = list(zip(lower, lower[1:], lower[2:], strict=False))
    gram_counts = Counter(grams)
    dup_grams = sum(c for c in gram_counts.values() if c > 1)
    return QualitySignals(
        n_chars=len(text),
        n_words=len(words),
        symbol_frac=symbols / n_ns,
        alpha_frac=alpha / n_ns,
        mean_word_len=sum(map(len, words)) / max(len(words), 1),
        dup_line_frac=dup_lines / max(len(lines), 1),
        dup_ngram_frac=dup_grams / max(len(grams), 1),
    )


def junk_reason(text: str, cfg: CurationConfig = CurationConfig()) -> str | None:
    """The first quality rule `text` breaks ("junk:<rule>"), or None if it passes."""
    s = quality_signals(text)
    if s.n_chars < cfg.min_chars:
        return "junk:short"
    if s.symbol_frac > cfg.max_symbol_frac or s.alpha_frac < cfg.min_alpha_frac:
        return "junk:symbols"
    if s.n_words and not cfg.min_mean_word_len <= s.mean_word_len <= cfg.max_mean_word_len:
        return "junk:gibberish"
    if s.n_words < cfg.min_words:
        return "junk:short"
    if not cfg.min_mean_word_len <= s.mean_word_len <= cfg.max_mean_word_len:
        return "junk:gibberish"
    if s.dup_line_frac > cfg.max_dup_line_frac or s.dup_ngram_frac > cfg.max_dup_ngram_frac:
        return "junk:repetition"
    return None


def shingles(text: str, k: int) -> set[str]:
    """Lower-cased word k-grams (the whole text as one shingle when it has < k words)."""
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < k:
        return {" ".join(words)}
    return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}


def _minhash(sh: set[str], cfg: CurationConfig) -> MinHash:
    m = MinHash(num_perm=cfg.num_perm, seed=cfg.seed)
    m.update_batch([s.encode("utf-8") for s in sorted(sh)])
    return m


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(len(a | b), 1)


def find_near_duplicates(
    texts: Sequence[str], cfg: CurationConfig = CurationConfig()
) -> dict[int, int]:
    """{index: index of the earlier kept text it near-duplicates}, in input order."""
    lsh = MinHashLSH(threshold=cfg.lsh_threshold, num_perm=cfg.num_perm)
    kept: dict[int, set[str]] = {}
    dups: dict[int, int] = {}
    for i, text in enumerate(texts):
        sh = shingles(text, cfg.shingle)
        mh = _minhash(sh, cfg)
        cands = sorted(int(c) for c in lsh.query(mh))
        best = max(cands, key=lambda j: (_jaccard(sh, kept[j]), -j), default=None)
        if best is not None and _jaccard(sh, kept[best]) >= cfg.dup_threshold:
            dups[i] = best
            continue
        kept[i] = sh
        lsh.insert(str(i), mh)
    return dups


def _text_of(doc: Any) -> str:
    return doc if isinstance(doc, str) else doc.text


def curate(
    docs: Sequence[T],
    cfg: CurationConfig = CurationConfig(),
    text_of: Callable[[T], str] = _text_of,
) -> tuple[list[T], CurationReport]:
    """Drop junk, then near duplicates.

    Args:
        docs: strings or objects with a `.text` (e.g. the world's Doc), or use `text_of`.
        cfg: thresholds.
        text_of: how to get a document's text.

    Returns:
        (kept documents in input order, report with counts per drop reason).
    """
    report = CurationReport(n_in=len(docs))
    clean: list[int] = []
    for i, doc in enumerate(docs):
        reason = junk_reason(text_of(doc), cfg)
        if reason is None:
            clean.append(i)
        else:
            report.reasons[i] = reason
    if cfg.dedup:
        dups = find_near_duplicates([text_of(docs[i]) for i in clean], cfg)
        for local, first in dups.items():
            report.reasons[clean[local]] = "near_duplicate"
            report.duplicate_of[clean[local]] = clean[first]
    kept = [d for i, d in enumerate(docs) if i not in report.reasons]
    report.n_kept = len(kept)
    return kept, report
