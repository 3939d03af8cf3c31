"""The pretraining mixture: web pages, code, math worked solutions, plus injected junk and
near-duplicates with honest labels.

Junk (domain "junk") is character soup, spam boilerplate repeated many times, and near-empty
pages; near-duplicates are copies of clean documents with a few words swapped, whitespace
changes or an appended line, keeping the original's domain and pointing `dup_of` at it. Both
exist so that the data-curation stage has something real to find and can be scored by counts.
"""

from __future__ import annotations

import random
import string
from dataclasses import asdict, dataclass
from typing import Literal

Domain = Literal["web", "code", "math", "junk"]
SPAM = [
    "BUY NOW!!! Best deals at cheap-deals.example, click here >>>",
    "Subscribe to our newsletter for FREE prizes!!! Limited offer!!!",
    "Cookie settings | Privacy policy | Terms of use | Sitemap | Login",
]
NEAR_EMPTY = ["", " ", "\n\n", "ok", "Page not found.", "null", "TODO"]
TRAILERS = ["Last updated 2021.", "Share this page.", "(edited)", "Source: archive copy."]


@dataclass
class Doc:
    id: str
    text: str
    domain: Domain
    dup_of: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _junk(rng: random.Random, i: int) -> Doc:
    kind = rng.randrange(3)
    if kind == 0:
        alphabet = string.ascii_letters + string.digits + string.punctuation + "  "
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(200, 1500)))
    elif kind == 1:
        text = "\n".join([rng.choice(SPAM)] * rng.randint(10, 40))
    else:
        text = rng.choice(NEAR_EMPTY)
    return Doc(f"junk-{i:06d}", text, "junk")


def near_duplicate(rng: random.Random, doc: Doc, i: int) -> Doc:
    """A copy of `doc` with small edits: 1-3 words replaced, whitespace, or a trailing line."""
    words = doc.text.split(" ")
    for _ in range(rng.randint(1, 3)):
        j = rng.randrange(len(words))
        words[j] = rng.choice(["the", "a", "this", "its", "new", "old"])
    text = " ".join(words)
    edit = rng.randrange(3)
    if edit == 0:
        text = text.replace("\n", "\n\n", 1)
    elif edit == 1:
        text = text + "\n" + rng.choice(TRAILERS)
    else:
        text = text.rstrip() + "  \n"
    return Doc(f"dup-{i:06d}", text, doc.domain, dup_of=doc.id)


def mix(rng: random.Random, clean: list[Doc], junk_frac: float, dup_frac: float) -> list[Doc]:
    """Add junk and near-duplicates (each ~frac of the clean characters) and shuffle."""
    total = sum(len(d.text) for d in clean)
    extra: list[Doc] = []
    chars = 0
    while chars < junk_frac * total:
        extra.append(_junk(rng, len(extra)))
        chars += max(len(extra[-1].text), 50)
    candidates = [d for d in clean if len(d.text) >= 300]
    chars, n = 0, 0
    while candidates and chars < dup_frac * total:
        dup = near_duplicate(rng, rng.choice(candidates), n)
        extra.append(dup)
        chars, n = chars + len(dup.text), n + 1
    docs = clean + extra
    rng.shuffle(docs)
    return docs
