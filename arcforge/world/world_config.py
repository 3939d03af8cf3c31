"""The world's configuration: sizes, task / demo / episode counts, and the per-component rng.

Every component of a world gets its own rng derived from the seed and a component name
(`component_rng`: `random.Random("<seed>:<part>")`, which Python hashes with SHA-512), so adding
a component never shifts another's output.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields


@dataclass
class TaskCounts:
    """Train / held-out task counts per suite (before `scale`)."""

    reasoning: tuple[int, int] = (1500, 300)
    tool: tuple[int, int] = (400, 300)
    chat: tuple[int, int] = (300, 300)  # 300 held out: at n = 100 noise hid general RL's changes
    long_context: tuple[int, int] = (60, 30)
    code: tuple[int, int] = (240, 40)
    terminal: tuple[int, int] = (420, 105)  # 60 / 15 per family
    swe: tuple[int, int] = (40, 20)
    search: tuple[int, int] = (300, 100)


@dataclass
class DemoCounts:
    """SFT demos per kind (before `scale`). Reasoning stays small on purpose: RL needs room."""

    reasoning: int = 120
    reasoning_no_think: int = 40
    tool: int = 160
    tool_correction: int = 40
    chat: int = 80
    code: int = 30
    terminal: int = 35
    swe: int = 10


@dataclass
class EpisodeCounts:
    """SFT conversations per kind recorded from scripted experts acting in the real
    environments (`world:episodes` sources, arcforge.synth.episodes; before `scale`)."""

    tool: int = 120
    search: int = 60
    tir: int = 60
    code: int = 40
    terminal: int = 40
    swe: int = 16
    swarm: int = 0  # orchestrator episodes (`world:episodes/swarm`; off unless a config asks)


@dataclass
class WorldConfig:
    """Sizes for the CPU demo; `scale` multiplies entity, corpus, task, demo counts."""

    seed: int = 0
    scale: float = 1.0
    n_people: int = 1800
    n_places: int = 240
    n_orgs: int = 360
    n_works: int = 900
    heldout_frac: float = 0.08
    n_repos: int = 12
    n_test_repos: int = 4
    code_to_web: float = 0.4  # code chars per web char (web 50%, code 20%, math 30%)
    math_to_web: float = 0.6
    copy_drills: float = 0.0  # copy-drill chars per web char (arcforge.world.text.drills)
    terminal_fresh_slots: float = 0.0  # chance of a made-up value per terminal task slot
    code_fresh_names: float = 0.0  # chance of a made-up function name per code train task
    swe_fresh_repos: float = 0.0  # chance of a renamed (made-up) repo per SWE train task
    swe_fresh_functions: float = 0.0  # chance of made-up function names per SWE train task
    # SWE train bugs taking turns by buggy function (as fresh/dev tasks do), from 4x the draws:
    # drawn as they come, a few functions take most bugs and SFT leaves the rare fixes unlearnt.
    # Held-out bugs are drawn as before.
    swe_balance: bool = False
    # hop counts that search questions draw from, uniformly (Search-R1 mixes 1-hop NQ-style
    # questions with HotpotQA-style multi-hop ones); the default leaves worlds as they were
    search_hops: list[int] = field(default_factory=lambda: [2, 2, 3])
    junk_frac: float = 0.05
    dup_frac: float = 0.05
    heldout_math: int = 300
    heldout_snippets: int = 40
    long_context_chars: list[int] = field(default_factory=lambda: [1000, 2000, 4000])
    tasks: TaskCounts = field(default_factory=TaskCounts)
    demos: DemoCounts = field(default_factory=DemoCounts)
    episodes: EpisodeCounts = field(default_factory=EpisodeCounts)

    def n(self, base: int, floor: int = 2) -> int:
        return max(floor, round(base * self.scale))

    def split_counts(self, counts: tuple[int, int]) -> tuple[int, int]:
        """A kind's (train, test) task counts after `scale`."""
        return self.n(counts[0]), self.n(counts[1])

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> WorldConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"world config has unknown key(s): {', '.join(unknown)}")
        d = dict(d)
        d["tasks"] = TaskCounts(**{k: tuple(v) for k, v in d.get("tasks", {}).items()})
        d["demos"] = DemoCounts(**d.get("demos", {}))
        d["episodes"] = EpisodeCounts(**d.get("episodes", {}))
        return cls(**d)


def component_rng(cfg: WorldConfig, part: str) -> random.Random:
    """The rng of one named component of the world `cfg` describes."""
    return random.Random(f"{cfg.seed}:{part}")
