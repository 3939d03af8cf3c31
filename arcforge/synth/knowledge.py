"""Runs of the knowledge-side producers (search / WKG, ABE, GEM): inputs, LLM client, outputs.

Used by `arcforge synth search | abe | gem`. Inputs are the embedded world (from a run config)
or files: pages JSONL ({"id", "title", "text"}), task descriptions (one per line, or JSONL with
"description"), texts (JSONL with "text", a .txt/.md file, or a directory of them). Every run
writes its records and a `summary.json` with the per-step counts into the output directory,
and keeps the pipeline journals in `<out>/journal/`: rerunning the same command resumes.
When the world is the input, the WKG extractors are also scored against the world's ground
truth (`summary["graph"]["check"]`); the ground truth never feeds the extractors.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from arcforge.errors import UserError
from arcforge.synth.pipeline import parse_jsonl


def make_client(url: str | None, model: str, key_env: str | None = "OPENAI_API_KEY") -> Any:
    """An LLMClient for `url`, or None when no URL is given."""
    if not url:
        return None
    from arcforge.llm import LLMClient

    return LLMClient(url, model, api_key_env=key_env)


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"got {type(value).__name__}")
    return value


def read_jsonl(path: Path, what: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file of `what` (pages, texts, ...), one per non-blank line."""
    if not path.is_file():
        raise UserError(f"{what} file not found: {path}")
    return parse_jsonl(path, _json_object, "not a JSON object")


def load_pages(path: Path) -> list[Any]:
    from arcforge.synth.wkg import Doc

    pages = []
    for i, d in enumerate(read_jsonl(path, "pages")):
        if "text" not in d:
            raise UserError(f"{path}:{i + 1}: a page needs 'text' (and 'id', 'title')")
        pages.append(Doc(str(d.get("id", f"page-{i:05d}")), str(d.get("title", "")), d["text"]))
    return pages


def load_texts(path: Path) -> list[tuple[str, str]]:
    """(id, text) pairs from a JSONL file, a text file or a directory of .txt / .md files."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".md"))
        return [(str(p.relative_to(path)), p.read_text()) for p in files]
    if path.suffix == ".jsonl":
        rows = read_jsonl(path, "texts")
        bad = [i + 1 for i, d in enumerate(rows) if not isinstance(d.get("text"), str)]
        if bad:
            raise UserError(f"{path}: line(s) {bad[:5]} have no string 'text'")
        return [(str(d.get("id", f"text-{i:05d}")), d["text"]) for i, d in enumerate(rows)]
    if not path.is_file():
        raise UserError(f"texts not found: {path}")
    return [(path.name, path.read_text())]


def load_descriptions(path: Path) -> list[str]:
    if path.suffix == ".jsonl":
        return [str(d.get("description") or d.get("text") or "") for d in read_jsonl(path, "x")]
    if not path.is_file():
        raise UserError(f"descriptions file not found: {path}")
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]


def world_graph(world: Any, client: Any = None, llm_pages: int | None = 0):
    """The WKG of the world's pages and its summary (counts + a check against the KB)."""
    from arcforge.synth.wkg import build_graph, score_against

    counts: Counter = Counter()
    graph = build_graph(world.pages, client if llm_pages != 0 else None, llm_pages, counts)
    truth = [(t.subject, t.relation, t.object) for t in world.kb.triples]
    return graph, {
        **dict(counts),
        "triples": len(graph.evidence),
        "entities": len(graph.entities),
        "conflicts": len(graph.conflicts()),
        "check": score_against(graph, truth),
    }


def _write(out: Path, name: str, rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / name, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


def run_search(
    out: Path,
    world: Any = None,
    pages: list | None = None,
    cfg: Any = None,
    client: Any = None,
    llm_pages: int | None = 0,
    engine: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """WKG + search synthesis; writes wkg.jsonl, tasks.jsonl, summary.json. `engine`, an
    (Engine, tokenizer) pair, is a model that must also fail to answer within 2 searches."""
    from arcforge.synth.search import SearchSynthConfig, synthesize_search
    from arcforge.synth.wkg import build_graph

    if world is not None:
        graph, gsum = world_graph(world, client, llm_pages)
        docs = list(world.pages)
    else:
        counts: Counter = Counter()
        graph = build_graph(pages or [], client if llm_pages != 0 else None, llm_pages, counts)
        gsum, docs = {**dict(counts), "triples": len(graph.evidence)}, list(pages or [])
    if not graph.evidence:
        raise UserError("the pages gave no facts; search synthesis needs a knowledge graph")
    work = out / "journal"
    tasks, summary = synthesize_search(
        graph, docs, cfg or SearchSynthConfig(), client, engine, work_dir=work
    )
    out.mkdir(parents=True, exist_ok=True)
    graph.save(out / "wkg.jsonl")
    summary["graph"] = gsum
    _write(out, "tasks.jsonl", [t.to_dict() for t in tasks], summary)
    return summary


def run_abe(
    out: Path,
    n: int,
    seed: int = 0,
    world: Any = None,
    descriptions: list | None = None,
    client: Any = None,
    ops: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """ABE tasks from the world's WKG (rule route) or from descriptions (LLM route)."""
    from arcforge.synth.abe import SCALE_OPS
    from arcforge.synth.abe_tools import synthesize_abe

    graph = world_graph(world)[0] if world is not None and descriptions is None else None
    tasks, summary = synthesize_abe(
        n,
        seed,
        graph,
        descriptions,
        client,
        ops=tuple(ops) if ops is not None else SCALE_OPS,
        work_dir=out / "journal",
    )
    _write(out, "tasks.jsonl", [t.to_dict() for t in tasks], summary)
    return summary


def run_gem(
    out: Path,
    texts: list[tuple[str, str]],
    client: Any = None,
    refine: bool = True,
    limit: int | None = None,
) -> dict[str, Any]:
    """GEM trajectories (SFT records) from texts."""
    from arcforge.synth.gem_llm import synthesize_gem

    records, summary = synthesize_gem(texts, client, refine, limit, work_dir=out / "journal")
    _write(out, "sft.jsonl", records, summary)
    return summary


def world_texts(world: Any) -> list[tuple[str, str]]:
    """The world's clean corpus documents (no junk, no near-duplicates) as GEM input."""
    return [(d.id, d.text) for d in world.corpus() if d.domain != "junk" and not d.dup_of]
