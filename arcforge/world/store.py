"""Save / load a world as a directory of JSON and JSONL files (one record per line).

Layout: config.json, kb.json, pages.jsonl, repos.jsonl, corpus.jsonl, heldout.jsonl,
tasks/<suite>.<split>.jsonl, demos.jsonl. Files are written with sorted keys so that the same
world always produces byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from arcforge.types import Task
from arcforge.world.corpus import Doc
from arcforge.world.demos import Demo
from arcforge.world.kb import KB
from arcforge.world.pages import Page
from arcforge.world.repos import Repo
from arcforge.world.world import World, WorldConfig


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


def save_world(world: World, root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tasks").mkdir(exist_ok=True)
    _dump(root / "config.json", world.config.to_dict())
    _dump(root / "kb.json", world.kb.to_dict())
    _dump_lines(root / "pages.jsonl", [asdict(p) for p in world.pages])
    _dump_lines(root / "repos.jsonl", [r.to_dict() for r in world.repos])
    _dump_lines(root / "corpus.jsonl", [d.to_dict() for d in world.corpus_docs])
    _dump_lines(root / "heldout.jsonl", [d.to_dict() for d in world.heldout_docs])
    for suite, splits in world.task_pools.items():
        for split, tasks in splits.items():
            _dump_lines(root / "tasks" / f"{suite}.{split}.jsonl", [t.to_dict() for t in tasks])
    _dump_lines(root / "demos.jsonl", [d.to_dict() for d in world.demos])


def load_world(root: Path) -> World:
    if not (root / "config.json").exists():
        raise FileNotFoundError(f"{root} is not a saved world (no config.json)")
    cfg = WorldConfig.from_dict(json.loads((root / "config.json").read_text()))
    pools: dict[str, dict[str, list[Task]]] = {}
    for f in sorted((root / "tasks").glob("*.jsonl")):
        suite, split = f.stem.rsplit(".", 1)
        pools.setdefault(suite, {})[split] = [Task.from_dict(d) for d in _lines(f)]
    return World(
        config=cfg,
        kb=KB.from_dict(json.loads((root / "kb.json").read_text())),
        pages=[Page(**d) for d in _lines(root / "pages.jsonl")],
        repos=[Repo.from_dict(d) for d in _lines(root / "repos.jsonl")],
        corpus_docs=[Doc(**d) for d in _lines(root / "corpus.jsonl")],
        heldout_docs=[Doc(**d) for d in _lines(root / "heldout.jsonl")],
        task_pools=pools,
        demos=[Demo.from_dict(d) for d in _lines(root / "demos.jsonl")],
    )
