"""Syllable-built names, so that the world's entities are novel tokens no pretrained model knows.

Every generator takes an explicit `random.Random`; nothing here touches global random state,
which is what keeps a world byte-identical for a given seed.
"""

from __future__ import annotations

import random

ONSETS = [
    "b",
    "br",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "pr",
    "r",
    "s",
    "sk",
    "st",
    "t",
    "th",
    "tr",
    "v",
    "vr",
    "z",
    "zh",
    "qu",
    "y",
]
VOWELS = ["a", "e", "i", "o", "u", "ae", "ai", "ou", "ei", "ia", "y"]
CODAS = ["", "", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk", "sh", "lt"]
PLACE_SUFFIX = ["ford", "holm", "mere", "gate", "wick", "haven", "stad", "vale", "burg", "port"]
ORG_SUFFIX = ["Labs", "Works", "Guild", "Collective", "Foundry", "Systems", "Press", "Studios"]
WORK_NOUNS = [
    "River",
    "Lantern",
    "Engine",
    "Garden",
    "Archive",
    "Signal",
    "Harbor",
    "Mirror",
    "Compass",
    "Orchard",
    "Tower",
    "Winter",
    "Circuit",
    "Atlas",
    "Ember",
    "Meadow",
]


def word(rng: random.Random, n_syllables: int) -> str:
    """One capitalised pseudo-word of `n_syllables` syllables."""
    parts = []
    for i in range(n_syllables):
        onset = rng.choice(ONSETS) if (i == 0 or rng.random() < 0.7) else ""
        coda = rng.choice(CODAS) if i == n_syllables - 1 or rng.random() < 0.25 else ""
        parts.append(onset + rng.choice(VOWELS) + coda)
    return "".join(parts).capitalize()


class NameBank:
    """Hands out names that are unique across the whole world (and across entity kinds)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        self.used_words: set[str] = set()

    def _unique(self, make) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted; lower the entity counts")

    def _fresh_word(self, lo: int, hi: int) -> str:
        # Single words are unique too, so a first name never doubles as a place name.
        def make() -> str:
            return word(self.rng, self.rng.randint(lo, hi))

        for _ in range(1000):
            w = make()
            if w not in self.used_words and len(w) >= 3:
                self.used_words.add(w)
                return w
        raise RuntimeError("word space exhausted")

    def person(self) -> str:
        return self._unique(lambda: f"{self._fresh_word(2, 2)} {self._fresh_word(2, 3)}")

    def place(self) -> str:
        def make() -> str:
            w = self._fresh_word(1, 2)
            return w + self.rng.choice(PLACE_SUFFIX) if self.rng.random() < 0.5 else w

        return self._unique(make)

    def country(self) -> str:
        return self._unique(lambda: self._fresh_word(2, 3) + self.rng.choice(["ia", "land", "a"]))

    def org(self) -> str:
        return self._unique(lambda: f"{self._fresh_word(2, 2)} {self.rng.choice(ORG_SUFFIX)}")

    def work(self) -> str:
        def make() -> str:
            noun, w = self.rng.choice(WORK_NOUNS), self._fresh_word(2, 2)
            form = self.rng.randrange(3)
            return [f"The {noun} of {w}", f"{w} {noun}", f"{noun} over {w}"][form]

        return self._unique(make)

    def token(self) -> str:
        """A fresh lowercase identifier-safe word (repo names, file names)."""
        return self._fresh_word(2, 2).lower()
