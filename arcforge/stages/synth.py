"""The `synth` stage: agentic data synthesis on the world, feeding later SFT / agentic RL stages.

What it does, in `RUN_DIR/<stage>/`:
- swe/: each of the first `swe_repos` world repositories is written as a git repo and gets up
  to `swe_bugs` synthetic bugs (AST mutations kept when they break a test, validated `runs`
  times in the sandbox) -> swe/instances.jsonl (SWE-bench shape); with `swe_llm_rewrite` the
  LLM rewrites each instance's problem statement as an issue, and a rewrite that loses the
  code names or leaks a test name or the fix is not used (counted by reason);
- terminal/: when `terminal_seeds` > 0, the world's terminal tasks seed LLM-driven terminal
  synthesis against an OpenAI-compatible endpoint: `llm.base_url`, or `llm.checkpoint` (a stage
  of this run, served in-process by `arcforge serve`'s app) -> terminal/tasks/<id>/ (Harbor);
  each seed is also a draft itself, so the construction agent runs even when expansion fails;
  `terminal_pages` > 0 also sends that many how-to pages (arcforge.world.text.tutorials) through
  the web-page route;
- search/: when `search` > 0, WKG + multi-hop search synthesis from the world's pages, with the
  LLM as the no-tool filter (a question the model answers without searching is dropped) and
  as the paraphraser (and, with `search_llm_pages`, as the triple extractor of that many
  free-text pages); when the LLM is a checkpoint served in-process, that model also runs the
  search agent and a question it answers within 2 searches is dropped (`search_model_filter`)
  -> search/tasks.jsonl, search/wkg.jsonl, search/summary.json;
- abe/: when `abe` > 0, ABE tool environments: `abe_route: llm` has the LLM decompose and
  document the world's search questions (train split) as tool sets; `rule` samples
  them from the world's knowledge graph -> abe/tasks.jsonl, abe/summary.json;
- gem/: when `gem_texts` > 0, GEM (extract -> tools -> trajectory -> refine; `gem_route` llm
  or rule) over the first procedure-like clean corpus texts -> gem/sft.jsonl, SFT records
  (with their OpenAI tool schemas) an SFT stage reads as `jsonl:RUN_DIR/<stage>/gem/sft.jsonl`
  — the demo runs the rule route before SFT so that synthesis feeds SFT;
- toolcalls/: when `toolcalls` > 0, that many procedural function-calling tasks over many
  distinct function schemas (arcforge.synth.toolcalls; simple, multiple, parallel,
  parallel_multiple, irrelevance in the shares of `toolcalls_weights`, equal by default; no
  LLM) -> toolcalls/sft.jsonl (SFT records with their tool schemas, read as
  `jsonl:RUN_DIR/<stage>/toolcalls/sft.jsonl`), toolcalls/tasks.jsonl (ABE Task records for
  agentic RL, read as `jsonl:RUN_DIR/<stage>/toolcalls/tasks.jsonl`), toolcalls/summary.json;
- rl_pool.jsonl: every accepted SWE / terminal task as a Task record (task + env config +
  verifier), readable as `jsonl:RUN_DIR/<stage>/rl_pool.jsonl` by the agentic RL stage;
- the returned metrics: per-step counts of both pipelines, and the tool-call summary (tasks
  per category, distinct function names).
A tiny demo checkpoint mostly writes unusable JSON; its drafts are dropped and counted, which
is the honest outcome. The stage trains nothing and writes no checkpoint (eval: false).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from arcforge.config import StageCfg, Strict
from arcforge.stages.context import RunContext


class SynthLLMCfg(Strict):
    base_url: str | None = None
    model: str = "arcforge"
    checkpoint: str | None = None  # a stage name of this run (or a path), served in-process
    api_key_env: str | None = "OPENAI_API_KEY"


class SynthStageCfg(StageCfg):
    """Agentic synthesis on the world (see the module docstring)."""

    kind: Literal["synth"]
    eval: bool = False
    swe_repos: int = Field(2, ge=0)
    swe_bugs: int = Field(4, ge=0)
    terminal_seeds: int = Field(0, ge=0)
    terminal_pages: int = Field(0, ge=0)  # how-to pages through the web-page route (0: skip)
    swe_llm_rewrite: bool = False  # the LLM rewrites SWE problem statements (guarded)
    search: int = Field(0, ge=0)  # search tasks wanted (0: skip)
    search_attempts: int = Field(400, gt=0)
    gem_texts: int = Field(0, ge=0)  # procedure-like world texts through GEM (0: skip)
    gem_route: Literal["llm", "rule"] = "llm"  # rule: no model needed (e.g. before SFT)
    search_model_filter: bool = True  # a served checkpoint must also fail within 2 searches
    search_llm_pages: int = Field(0, ge=0)  # free-text pages the LLM extracts WKG triples from
    abe: int = Field(0, ge=0)  # ABE tool environments wanted (0: skip)
    abe_route: Literal["llm", "rule"] = "llm"
    toolcalls: int = Field(0, ge=0)  # procedural function-calling tasks (0: skip)
    toolcalls_weights: dict[str, float] | None = None  # category -> share (None: equal)
    terminal_variants: int = Field(2, gt=0)
    runs: int = Field(3, gt=0)
    refine_runs: int = Field(5, gt=0)
    workers: int = Field(2, gt=0)
    backend: str = "bwrap"
    llm: SynthLLMCfg = SynthLLMCfg()


def _counts(summary: dict[str, Any], dropped: bool = False) -> dict[str, dict[str, Any]]:
    """A pipeline summary's per-step counts: {step: {"in", "out"[, "dropped"]}}."""
    steps = summary["steps"]
    rows = steps.items() if isinstance(steps, dict) else ((s["step"], s) for s in steps)
    keys = ("in", "out", "dropped") if dropped else ("in", "out")
    return {name: {k: v[k] for k in keys} for name, v in rows}


def _swe(ctx: RunContext, stage: SynthStageCfg, out: Path, llm: Any) -> tuple[list, dict]:
    from dataclasses import replace

    from arcforge.synth.export import load_tasks
    from arcforge.synth.swe import SWESynthConfig, synthesize_bugs
    from arcforge.world.code.pysource import WORLD_SWE_TOOLS

    tasks, counts = [], {}
    cfg = SWESynthConfig(
        runs=stage.runs,
        backend=stage.backend,
        workers=stage.workers,
        max_bugs=stage.swe_bugs,
        seed=stage.seed,
        llm=llm if stage.swe_llm_rewrite else None,
    )
    train_repos = [r for r in ctx.world.repos if r.split == "train"]  # never a held-out repo
    for repo in train_repos[: stage.swe_repos]:
        src = out / "swe" / "repos" / repo.name
        if not (src / ".git").exists():
            repo.materialize(src, git=True)
        recs, path = synthesize_bugs(src, out / "swe" / repo.name, cfg)
        # the world's repos: offer the world SWE tasks' tools, the ones SFT's episodes used (all
        # seven schemas take ~1300 of the demo model's 2048 tokens)
        tasks += [replace(t, tools=list(WORLD_SWE_TOOLS)) for t in load_tasks(path)] if recs else []
        summary = json.loads((out / "swe" / repo.name / "summary.json").read_text())
        counts[repo.name] = _counts(summary, dropped=True)
        if stage.swe_llm_rewrite:
            counts[repo.name]["statement_rewrite"] = dict(
                Counter(r.data.get("statement_rewrite", "not tried") for r in recs)
            )
    return tasks, counts


def _llm(ctx: RunContext, stage: SynthStageCfg):
    """(LLMClient, stop callback, engine) for the configured endpoint or in-process checkpoint.

    `engine` is (ServerEngine, tokenizer) on the in-process server, for steps that run the model
    as an agent (token ids in and out, serialized by the server's lock); None for a remote
    endpoint, whose tokenizer we do not have."""
    from arcforge.llm import LLMClient

    c = stage.llm
    if c.base_url:
        return LLMClient(c.base_url, c.model, c.api_key_env), lambda: None, None
    from arcforge.eval.evaluator import load_engine
    from arcforge.replay import serve_in_thread
    from arcforge.rollout.engines.http import ServerEngine
    from arcforge.rollout.serve import create_app

    names = [s.name for s in ctx.cfg.stages]
    ref = c.checkpoint or names[max(0, names.index(stage.name) - 1)]
    ckpt = ctx.checkpoint(ref) if ref in names else Path(ref)
    _, tok, engine = load_engine(ckpt)  # its own tokenizer: a path may be any model
    server, thread, url = serve_in_thread(create_app(engine, ref, tok))

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    client = LLMClient(url, ref, api_key_env=None, max_retries=1)
    return client, stop, (ServerEngine(url, ref), tok)


def _terminal(ctx: RunContext, stage: SynthStageCfg, out: Path, llm: Any) -> tuple[list, dict]:
    from arcforge.synth.export import load_tasks
    from arcforge.synth.terminal import TerminalSynthConfig, synthesize_terminal
    from arcforge.world.text.tutorials import tutorial_pages

    seeds = [t.instruction for t in ctx.world.tasks("terminal", "train")[: stage.terminal_seeds]]
    pages = tutorial_pages(ctx.world, stage.terminal_pages) if stage.terminal_pages else []
    cfg = TerminalSynthConfig(
        llm=llm,
        n_variants=stage.terminal_variants,
        include_seed=True,
        runs=stage.refine_runs,
        workers=stage.workers,
        backend=stage.backend,
    )
    recs = synthesize_terminal(out / "terminal", cfg, seeds=seeds, pages=pages)
    summary = json.loads((out / "terminal" / "summary.json").read_text())
    counts = _counts(summary, True)
    expansion: Counter[str] = Counter()  # how each seed's expansion went (its seed draft says)
    drafts = out / "terminal" / "draft.jsonl"
    for line in drafts.read_text().splitlines() if drafts.exists() else []:
        for o in json.loads(line).get("outputs") or []:
            if e := o.get("data", {}).get("expansion"):
                expansion[e.split(":")[0]] += 1
    counts["seed_expansion"] = dict(expansion)
    return [t for r in recs for t in load_tasks(r.data["task_dir"])], counts


def _search(
    ctx: RunContext, stage: SynthStageCfg, out: Path, llm: Any, engine: Any
) -> dict[str, Any]:
    from arcforge.synth.knowledge import run_search
    from arcforge.synth.search import SearchSynthConfig

    cfg = SearchSynthConfig(
        n=stage.search, attempts=stage.search_attempts, paraphrase=True, seed=stage.seed
    )
    engine = engine if stage.search_model_filter else None
    summary = run_search(
        out / "search",
        world=ctx.world,
        cfg=cfg,
        client=llm,
        engine=engine,
        llm_pages=stage.search_llm_pages,
    )
    return {
        "kept": summary["kept"],
        "hops": summary["hops"],
        "info": summary["info"],
        "graph": summary["graph"],
        "steps": _counts(summary, dropped=True),
    }


def _gem(ctx: RunContext, stage: SynthStageCfg, out: Path, llm: Any) -> dict[str, Any]:
    from arcforge.synth.gem import is_procedure
    from arcforge.synth.knowledge import run_gem, world_texts

    texts = [t for t in world_texts(ctx.world) if is_procedure(t[1])][: stage.gem_texts]
    summary = run_gem(out / "gem", texts, client=llm if stage.gem_route == "llm" else None)
    return {"in": summary["in"], "kept": summary["kept"], "steps": _counts(summary)}


def _abe(ctx: RunContext, stage: SynthStageCfg, out: Path, llm: Any) -> dict[str, Any]:
    from arcforge.synth.knowledge import run_abe

    descs = None
    if stage.abe_route == "llm":
        descs = [t.instruction for t in ctx.world.tasks("search", "train")[: stage.abe]]
    summary = run_abe(out / "abe", stage.abe, stage.seed, ctx.world, descs, llm)
    return {"kept": summary["kept"], "scenarios": summary["scenarios"], "steps": _counts(summary)}


def _toolcalls(stage: SynthStageCfg, out: Path) -> dict[str, Any]:
    from arcforge.synth.toolcalls import CATEGORIES, synthesize_toolcalls

    weights = stage.toolcalls_weights
    categories = CATEGORIES if weights is None else tuple(weights)
    tasks, records, summary = synthesize_toolcalls(stage.toolcalls, stage.seed, categories, weights)
    d = out / "toolcalls"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "tasks.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    (d / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def run_synth_stage(ctx: RunContext, stage: SynthStageCfg, out: Path) -> dict[str, Any]:
    from arcforge.synth.export import export_rl_pool

    out.mkdir(parents=True, exist_ok=True)
    do_swe = bool(stage.swe_repos and stage.swe_bugs)
    swe_tasks, swe_counts = (
        _swe(ctx, stage, out, None) if do_swe and not stage.swe_llm_rewrite else ([], {})
    )
    term_tasks, term_counts, search, gem, abe = [], {}, {}, {}, {}
    gem_llm = stage.gem_texts and stage.gem_route == "llm"
    abe_llm = stage.abe and stage.abe_route == "llm"
    swe_llm = do_swe and stage.swe_llm_rewrite
    terminal = stage.terminal_seeds or stage.terminal_pages
    if stage.gem_texts and not gem_llm:
        gem = _gem(ctx, stage, out, None)
    if stage.abe and not abe_llm:
        abe = _abe(ctx, stage, out, None)
    toolcalls = _toolcalls(stage, out) if stage.toolcalls else {}
    if terminal or stage.search or gem_llm or abe_llm or swe_llm:
        llm, stop, engine = _llm(ctx, stage)  # one endpoint (or served model) for every LLM step
        try:
            if swe_llm:
                swe_tasks, swe_counts = _swe(ctx, stage, out, llm)
            if terminal:
                term_tasks, term_counts = _terminal(ctx, stage, out, llm)
            if stage.search:
                search = _search(ctx, stage, out, llm, engine)
            if gem_llm:
                gem = _gem(ctx, stage, out, llm)
            if abe_llm:
                abe = _abe(ctx, stage, out, llm)
        finally:
            stop()
    pool = export_rl_pool(swe_tasks + term_tasks, out / "rl_pool.jsonl", stage.backend)
    return {
        "swe_instances": len(swe_tasks),
        "terminal_tasks": len(term_tasks),
        "rl_pool": pool["out"],
        "swe": swe_counts,
        "terminal": term_counts,
        "search": search,
        "gem": gem,
        "abe": abe,
        "toolcalls": toolcalls,
    }
