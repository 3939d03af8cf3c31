"""Search synthesis: hard multi-hop search tasks from a web knowledge graph (GLM-5 WKG route).

    pages -> WKG -> sample (backward / random-walk subgraph) -> evolve -> graph_unique
          -> evidence -> consistency -> render (+ LLM paraphrase) -> no_tool -> two_search
          -> agents_agree -> Task(kind="search")

Filters (each counts in / out / dropped by reason in the summary):
- graph_unique: following the question from its start description yields exactly the answer;
- evidence: every hop (and every fact of a description) is backed by a page whose text
  contains both of its ends (evidence closure);
- consistency: no page disagrees with a hop's fact (cross-page consistency);
- no_tool: a configured model answers the bare question -> drop (skipped without a model);
- two_search: a scripted agent with 2 searches in the real SearchEnv solves it -> drop; so
  does a configured model (Engine) that solves it through the agent loop within 2 searches;
- agents_agree: several full-budget agent runs (different top-k and tie-breaking) must all
  reach the graph's answer (answer uniqueness and solvability).
The steps run on the synthesis pipeline (arcforge.synth.pipeline: journals, provenance,
resume by record id) in batches of drafts, stopping after the batch that reaches `n` tasks
(arcforge.synth.batches), so the costly agent filters do not run on far more drafts than
needed. Record ids are content hashes of the path, so a path drawn twice is dropped as a
duplicate, and every random choice is seeded by the record's id, so a rerun on the same
journal directory resumes without redoing or changing finished records.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcforge.envs.search_env import SearchIndex, normalize_answer
from arcforge.synth.batches import LLMGuard, run_batches, step_outputs
from arcforge.synth.pipeline import Drop, Record, Step, filter_step
from arcforge.synth.search_agents import (
    PlanAgent,
    answerable_without_tools,
    engine_solves,
    paraphrase,
)
from arcforge.synth.search_paths import (
    Draft,
    answer_pool,
    indirect,
    inject_uncertainty,
    is_unique,
    obfuscate,
    random_walk_subgraph,
    remove_salient,
    render,
    sample_backward,
)
from arcforge.synth.wkg import WebGraph, as_doc
from arcforge.types import Task, Validation


@dataclass
class SearchSynthConfig:
    """Knobs of search synthesis (defaults fit the CPU demo world)."""

    n: int = 20  # tasks wanted
    attempts: int = 2000  # drafts sampled at most (most dead-end: cheap)
    hops: tuple[int, ...] = (3, 4)
    band: tuple[float, float] = (0.0, 0.8)  # answer frequency quantiles (low-to-mid)
    subgraph_frac: float = 0.5  # share of drafts from Tongyi random-walk subgraphs
    walk_steps: int = 60
    inverse_weight: float = 0.3  # sampling weight of a unique inverse hop (forward: 1)
    ambiguous_prob: float = 0.05  # chance to take an ambiguous hop when no other is left
    p_indirect: float = 0.4
    p_remove_salient: float = 0.5
    p_obfuscate: float = 0.7
    p_uncertainty: float = 0.2
    paraphrase: bool = False
    no_tool_samples: int = 1
    agent_runs: int = 3
    agent_top_k: int = 5
    batch: int = 0  # drafts per pipeline batch (0: max(50, 10 n))
    workers: int = 1  # threads per step (more helps when an LLM endpoint is slow)
    seed: int = 0


def _draft(
    graph: WebGraph, rng: random.Random, pool: list[str], cfg: SearchSynthConfig
) -> Draft | None:
    k = rng.choice(cfg.hops)
    if rng.random() < cfg.subgraph_frac:
        edges = random_walk_subgraph(graph, rng, rng.choice(graph.entities), cfg.walk_steps)
        inside = sorted({n for t in edges for n in (t[0], t[2])} & set(pool))
        if not inside:
            return None
        d = sample_backward(
            graph, rng, rng.choice(inside), k, edges, cfg.inverse_weight, cfg.ambiguous_prob
        )
        if d is not None:
            d.sampler = "subgraph"
        return d
    return sample_backward(
        graph, rng, rng.choice(pool), k, None, cfg.inverse_weight, cfg.ambiguous_prob
    )


def _evolve(
    graph: WebGraph, d: Draft, rng: random.Random, cfg: SearchSynthConfig, counts: Counter
) -> Draft:
    """Apply each evolution op with its probability; an op that would break uniqueness is
    reverted (counted as `<op>_reverted`)."""

    def attempt(name: str, p: float, op: Callable[[], Draft | None]) -> None:
        nonlocal d
        if rng.random() >= p:
            return
        new = op()
        counts[f"{name}_applied" if new else f"{name}_reverted"] += 1
        d = new or d

    if rng.random() < cfg.p_uncertainty:
        attempt("uncertainty", 1.0, lambda: inject_uncertainty(graph, d, rng))
    else:
        attempt("indirect", cfg.p_indirect, lambda: indirect(graph, d))
        if d.start_desc:
            attempt("remove_salient", cfg.p_remove_salient, lambda: remove_salient(graph, d))
    if d.start_desc or d.answer_desc:
        attempt("obfuscate", cfg.p_obfuscate, lambda: obfuscate(graph, d))
    return d


def _facts_of(graph: WebGraph, d: Draft) -> list[tuple[str, str, str]]:
    """The path triples plus the true facts behind the descriptions."""
    facts = list(d.path)
    for entity, cs in ((d.nodes[0], d.start_desc or []), (d.answer, d.answer_desc)):
        for c in cs:
            facts += [(entity, c.relation, o) for o in graph.objects(entity, c.relation)]
    return facts


def evidence_problem(graph: WebGraph, texts: dict[str, str], d: Draft) -> str | None:
    """Evidence closure: every fact has a page whose text contains both of its ends."""
    for s, r, o in _facts_of(graph, d):
        pages = graph.evidence.get((s, r, o), [])
        if not any(s in texts.get(p, "") and o in texts.get(p, "") for p in pages):
            return "no_evidence"
    return None


def consistency_problem(graph: WebGraph, d: Draft) -> str | None:
    """Cross-page consistency: no page gives another object for a fact of the question."""
    for s, r, _ in _facts_of(graph, d):
        if len(graph.objects(s, r)) > 1:
            return "conflict"
    return None


def _anchors(d: Draft) -> list[str]:
    vals = [d.nodes[0]] if d.start_desc is None else []
    for c in (d.start_desc or []) + d.answer_desc:
        vals.append(f"{c.value}s" if c.mode == "decade" else c.value)
    return vals


def _task(graph: WebGraph, rec: Record, seed: int) -> Task:
    d = Draft.from_dict(rec.data["draft"])
    path = d.path
    meta = {
        "hops": len(d.hops),
        "path": [list(t) for t in path],
        "evidence": [graph.evidence[t][0] for t in path],
        "plan": d.plan(graph.types.get(d.nodes[0], "entity")),
        "ops": d.ops,
        "sampler": d.sampler,
        "template": rec.data["template"],
        "two_search": rec.data.get("two_search"),
        "agent_searches": rec.data.get("agent_searches"),
        "provenance": rec.provenance,
    }
    difficulty = min(1.0, len(d.hops) / 5 + 0.1 * len(d.ops))
    return Task(
        f"wkg-search-{seed}-{rec.id}",
        "search",
        rec.data["question"],
        tools=["search", "open", "answer"],
        validation=Validation(answer=d.answer),
        source="synth:search:wkg",
        difficulty=difficulty,
        metadata=meta,
    )


def _key(d: Draft) -> str:
    """A content id: the same path drawn twice gets the same id (the pipeline drops repeats)."""
    raw = json.dumps([d.nodes, [[h.relation, h.inverse] for h in d.hops]])
    return "q-" + hashlib.sha1(raw.encode()).hexdigest()[:12]


def _steps(
    graph: WebGraph,
    docs: list[Any],
    cfg: SearchSynthConfig,
    client: Any,
    engine: tuple[Any, Any] | None,
) -> list[Step]:
    """The pipeline steps; each is deterministic in its record (rngs seeded by record id)."""
    pages = [as_doc(d) for d in docs]
    texts = {p.id: p.text for p in pages}
    index = SearchIndex([(p.id, p.title, p.text) for p in pages])
    pool = answer_pool(graph, cfg.band)
    guard = LLMGuard("search synthesis")
    two = PlanAgent(graph, index, max_searches=2, top_k=3)
    agents = [
        PlanAgent(graph, index, max_searches=12, top_k=cfg.agent_top_k if i else 3, pick=i)
        for i in range(cfg.agent_runs)
    ]

    def draft(r: Record) -> Draft:
        return Draft.from_dict(r.data["draft"])

    def sample(r: Record) -> Record:
        rng = random.Random(f"search-synth:{cfg.seed}:{r.data['i']}")
        d = _draft(graph, rng, pool, cfg) if pool else None
        if d is None:
            raise Drop("dead_end")
        return Record(_key(d), {"draft": d.to_dict(), "attempt": r.data["i"]})

    def evolve(r: Record) -> Record:
        ops: Counter = Counter()
        d = _evolve(graph, draft(r), random.Random(f"search-synth:{cfg.seed}:{r.id}"), cfg, ops)
        return Record(r.id, {**r.data, "draft": d.to_dict(), "evolution": dict(ops)})

    def render_step(r: Record) -> Record:
        d = draft(r)
        template = question = render(graph, d)
        flag = None
        if cfg.paraphrase and client is not None:
            try:
                question = guard(lambda: paraphrase(client, template, _anchors(d), d.answer))
                question = question or template
                flag = "paraphrased" if question != template else "paraphrase_rejected"
            except Drop:  # no usable reply: the template question stays
                flag = "paraphrase_failed"
        return Record(
            r.id, {**r.data, "template": template, "question": question, "paraphrase": flag}
        )

    def no_tool(r: Record) -> str | None:
        if client is None:
            return None
        easy = guard(
            lambda: answerable_without_tools(
                client, r.data["question"], draft(r).answer, cfg.no_tool_samples
            )
        )
        return "answerable_without_tools" if easy else None

    def two_search(r: Record) -> Record:
        task = _task(graph, r, cfg.seed)
        short = two.run(task)
        if short.reward:
            raise Drop("two_search_solved")
        if engine is not None and engine_solves(*engine, task, index):
            raise Drop("engine_two_search_solved")
        return Record(
            r.id, {**r.data, "two_search": {"answer": short.answer, "searches": short.searches}}
        )

    def agents_agree(r: Record) -> Record:
        runs = [a.run(_task(graph, r, cfg.seed)) for a in agents]
        if not all(run.reward == 1.0 for run in runs):
            answers = {normalize_answer(run.answer) for run in runs}
            raise Drop("agents_disagree" if len(answers) > 1 else "agents_unsolved")
        return Record(r.id, {**r.data, "agent_searches": [run.searches for run in runs]})

    def unique(r: Record) -> str | None:
        return None if is_unique(graph, draft(r)) else "not_unique"

    return [
        Step("sample", sample),
        Step("evolve", evolve),
        filter_step("graph_unique", unique),
        filter_step("evidence", lambda r: evidence_problem(graph, texts, draft(r))),
        filter_step("consistency", lambda r: consistency_problem(graph, draft(r))),
        Step("render", render_step, on_error="raise"),
        filter_step("no_tool", no_tool, on_error="raise"),
        Step("two_search", two_search),
        Step("agents_agree", agents_agree),
    ]


def synthesize_search(
    graph: WebGraph,
    docs: list[Any],
    cfg: SearchSynthConfig,
    client: Any = None,
    engine: tuple[Any, Any] | None = None,
    work_dir: Path | None = None,
) -> tuple[list[Task], dict[str, Any]]:
    """Search tasks from a web knowledge graph and the pages it was extracted from.

    Args:
        graph: the WKG of `docs`.
        docs: the pages (they become the SearchEnv corpus the agents search).
        cfg: synthesis settings.
        client: optional LLMClient for the no-tool filter and paraphrases.
        engine: optional (Engine, tokenizer): a model that must also fail within 2 searches.
        work_dir: the pipeline's journal directory; reuse it to resume (None: a temporary one).

    Returns:
        (tasks, summary): summary has per-step counts (summed over batches), evolution counts,
        paraphrase / no-tool info, hop and op counts of the kept tasks.
    """
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(work_dir or tmp)

        def seeds(a: int, b: int) -> list[Record]:
            return [Record(f"draft-{i:06d}", {"i": i}) for i in range(a, b)]

        steps = _steps(graph, docs, cfg, client, engine)
        batch = cfg.batch or max(50, 10 * cfg.n)
        kept, counts = run_batches(
            steps, out, seeds, cfg.attempts, batch, cfg.n, "search", cfg.workers
        )
        evolution: Counter = Counter()
        for data in step_outputs(out, "evolve"):
            evolution.update(data.get("evolution", {}))
        info = Counter(d["paraphrase"] for d in step_outputs(out, "render") if d.get("paraphrase"))
    if client is None:
        info["no_tool_skipped"] = counts["no_tool"]["in"]
    if engine is not None:  # questions the model itself attempted as a 2-search agent
        solved = counts["two_search"]["dropped"].get("two_search_solved", 0)
        info["engine_two_search_runs"] = counts["two_search"]["in"] - solved
    tasks = [_task(graph, r, cfg.seed) for r in kept[: cfg.n]]
    summary = {
        "kept": len(tasks),
        "passed": len(kept),
        "steps": counts,
        "evolution": dict(evolution),
        "info": dict(info),
        "hops": dict(Counter(str(t.metadata["hops"]) for t in tasks)),
        "ops": dict(Counter(op for t in tasks for op in t.metadata["ops"])),
    }
    return tasks, summary


def write_outputs(out_dir: Path, tasks: list[Task], summary: dict[str, Any]) -> None:
    """tasks.jsonl (Task records) and summary.json under `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "tasks.jsonl", "w") as f:
        for t in tasks:
            f.write(json.dumps(t.to_dict()) + "\n")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
