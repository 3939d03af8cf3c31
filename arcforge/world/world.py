"""The world: its parts, their accessors, and save / load.

`build_world` (arcforge.world.build) generates a World from one `WorldConfig`. A saved world is a
directory of JSON and JSONL files (one record per line): config.json, kb.json, pages.jsonl,
repos.jsonl, corpus.jsonl, heldout.jsonl, tasks/<suite>.<split>.jsonl, demos.jsonl, written with
sorted keys so that the same world always produces byte-identical files; `World.load` reads it
back into an equal World (`==`).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from arcforge.types import Task, Tool
from arcforge.world.code.repos import Repo
from arcforge.world.fresh import fresh_tasks
from arcforge.world.knowledge.kb import KB
from arcforge.world.knowledge.pages import Page
from arcforge.world.knowledge.tools import make_tools
from arcforge.world.tasks.longctx import LongItem, make_long_items
from arcforge.world.tasks.pools import SUITES
from arcforge.world.text.corpus import Doc
from arcforge.world.text.demos import Demo
from arcforge.world.world_config import WorldConfig


def _dump(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n")


def _dump_lines(path: Path, records: list[dict]) -> None:
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        raise FileNotFoundError(f"world directory is missing {path.name} (expected at {path})")
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
    return out


@dataclass
class World:
    config: WorldConfig
    kb: KB
    pages: list[Page]
    repos: list[Repo]
    corpus_docs: list[Doc]
    heldout_docs: list[Doc]
    task_pools: dict[str, dict[str, list[Task]]]
    demos: list[Demo]
    _fresh: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def corpus(self) -> list[Doc]:
        """The pretraining mixture (web, code, math, junk, near-duplicates), shuffled."""
        return list(self.corpus_docs)

    def heldout_corpus(self) -> list[Doc]:
        """Clean docs about held-out entities / problems, disjoint from `corpus()`."""
        return list(self.heldout_docs)

    def tasks(self, suite: str, split: str = "train") -> list[Task]:
        """A suite's tasks; "tir" is the reasoning problems posed for a python tool (kind tir)."""
        if suite == "tir":
            return [replace(t, kind="tir") for t in self.tasks("reasoning", split)]
        if suite not in self.task_pools:
            raise ValueError(f"unknown suite {suite!r}; expected one of {', '.join(SUITES)}")
        if split in ("dev", "fresh"):  # generated on demand (arcforge.world.fresh)
            if suite not in self._fresh:
                self._fresh[suite] = fresh_tasks(
                    self.config, self.kb, self.pages, self.repos, self.task_pools, suite
                )
            return list(self._fresh[suite][split])
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train', 'test', 'dev' or 'fresh', got {split!r}")
        return list(self.task_pools[suite][split])

    def sft_demos(self, split: str = "train") -> list[Demo]:
        """Scripted expert demonstrations; only train tasks are ever used."""
        if split != "train":
            raise ValueError(f"SFT demos exist only for the train split, got {split!r}")
        return list(self.demos)

    def tools(self) -> dict[str, Tool]:
        """lookup, calculator, search, open_page bound to this world's KB and pages."""
        return make_tools(self.kb, self.pages)

    def long_context(
        self, n: int, target_chars: int, split: str = "train", seed: int = 0
    ) -> list[LongItem]:
        rng = random.Random(f"{self.config.seed}:long:{split}:{seed}:{target_chars}")
        return make_long_items(self.kb, self.pages, n, target_chars, split, rng)

    def save(self, path: str | Path) -> None:
        """Write the world as a directory of JSON / JSONL files (the layout above)."""
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        (root / "tasks").mkdir(exist_ok=True)
        _dump(root / "config.json", self.config.to_dict())
        _dump(root / "kb.json", self.kb.to_dict())
        _dump_lines(root / "pages.jsonl", [asdict(p) for p in self.pages])
        _dump_lines(root / "repos.jsonl", [r.to_dict() for r in self.repos])
        _dump_lines(root / "corpus.jsonl", [d.to_dict() for d in self.corpus_docs])
        _dump_lines(root / "heldout.jsonl", [d.to_dict() for d in self.heldout_docs])
        for suite, splits in self.task_pools.items():
            for split, tasks in splits.items():
                _dump_lines(root / "tasks" / f"{suite}.{split}.jsonl", [t.to_dict() for t in tasks])
        _dump_lines(root / "demos.jsonl", [d.to_dict() for d in self.demos])

    @classmethod
    def load(cls, path: str | Path) -> World:
        """The world `save` wrote to `path`, equal (`==`) to the one saved."""
        root = Path(path)
        if not (root / "config.json").exists():
            raise FileNotFoundError(f"{root} is not a saved world (no config.json)")
        cfg = WorldConfig.from_dict(json.loads((root / "config.json").read_text()))
        pools: dict[str, dict[str, list[Task]]] = {}
        for f in sorted((root / "tasks").glob("*.jsonl")):
            suite, split = f.stem.rsplit(".", 1)
            pools.setdefault(suite, {})[split] = [Task.from_dict(d) for d in _lines(f)]
        return cls(
            config=cfg,
            kb=KB.from_dict(json.loads((root / "kb.json").read_text())),
            pages=[Page(**d) for d in _lines(root / "pages.jsonl")],
            repos=[Repo.from_dict(d) for d in _lines(root / "repos.jsonl")],
            corpus_docs=[Doc(**d) for d in _lines(root / "corpus.jsonl")],
            heldout_docs=[Doc(**d) for d in _lines(root / "heldout.jsonl")],
            task_pools=pools,
            demos=[Demo.from_dict(d) for d in _lines(root / "demos.jsonl")],
        )
