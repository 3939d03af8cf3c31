"""`arcforge synth`: data synthesis.

    arcforge synth check-task TASK          stability + exploit probes -> JSON verdict
    arcforge synth swe --repo PATH ...      SWE instances from a git repo (fix commits, SWE-bench
                                            records, or synthetic AST-mutation bugs)
    arcforge synth terminal ...             terminal tasks from seeds or web pages via an LLM
    arcforge synth export ...               SFT JSONL / RL task pool from synthesized tasks
    arcforge synth rejection CHECKPOINT ... rejection-sampled SFT replies in a pass-rate band
    arcforge synth search|abe|gem ...       multi-hop search tasks, ABE tool environments, GEM
                                            tool-use trajectories from a world or given texts

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from arcforge.cli.shared import setup_world, source_loader
from arcforge.errors import UserError

synth_app = typer.Typer(no_args_is_help=True, help="Data synthesis.")

# swe (rewrites problem statements when given) and terminal (drafts and repairs tasks)
TaskLLMUrl = typer.Option("", "--llm-url", help="OpenAI-compatible endpoint (e.g. arcforge serve).")
TaskLLMModel = typer.Option("arcforge", "--llm-model", help="Model name sent to the endpoint.")
TaskLLMKey = typer.Option("OPENAI_API_KEY", "--llm-key-env", help="Env var holding the API key.")
# search, abe and gem: the endpoint of their LLM steps, and the world they read by default
KnowledgeLLMUrl = typer.Option(
    None, "--llm-url", help="OpenAI-compatible endpoint (arcforge serve)."
)
KnowledgeLLMModel = typer.Option("default", "--llm-model", help="Model name sent to the endpoint.")
KnowledgeLLMKey = typer.Option(
    "OPENAI_API_KEY", "--llm-key-env", help="Env variable with the API key."
)
WorldCfgOpt = typer.Option(None, "--config", help="Run config whose world is the input.")


@synth_app.command("check-task")
def check_task_cmd(
    task: Path = typer.Argument(
        ...,
        help="A Harbor / Terminal-Bench task dir, a Task JSON(L) file, or a SWE-bench "
        "instance JSONL whose record carries repo_path.",
    ),
    runs: int = typer.Option(3, help="Fresh episodes for the oracle and the empty solution."),
    probes: str = typer.Option("", help="Comma-separated probe names (default: all)."),
    backend: str = typer.Option("bwrap", help="Sandbox backend: bwrap or docker."),
) -> None:
    """Check a task's verifier: oracle passes n/n, empty fails n/n, no exploit probe fools it."""
    from arcforge.synth.checktask import check_task_exploits

    if not task.exists():
        raise UserError(f"task not found: {task}")
    names = [p.strip() for p in probes.split(",") if p.strip()] or None
    try:
        res = check_task_exploits(task, runs=runs, backend=backend, probes=names)
    except (ValueError, json.JSONDecodeError) as err:
        raise UserError(f"{task}: {err}") from None
    typer.echo(json.dumps(res, indent=1))


def _summary(out: Path) -> dict:
    data = json.loads((out / "summary.json").read_text())
    return {s["step"]: {k: s[k] for k in ("in", "out", "dropped")} for s in data["steps"]}


@synth_app.command("swe")
def swe_cmd(
    repo: Path = typer.Option(..., "--repo", help="A local git repository with pytest tests."),
    out: Path = typer.Option(..., "--out", help="Output dir (instances.jsonl, summary.json)."),
    commit: list[str] = typer.Option(
        None, "--commit", help="A fix commit (base = its first parent); repeatable."
    ),
    commits: str = typer.Option(None, "--commits", help="Every commit of the range A..B."),
    records: Path = typer.Option(
        None, help="SWE-bench style JSONL (base_commit, patch, test_patch) instead of commits."
    ),
    bugs: int = typer.Option(0, help="Synthesize this many AST-mutation bugs instead."),
    install: str = typer.Option(
        "",
        help="Install command run in the repo with the environment's pip on PATH "
        "(default: pip install -e .[test extras] + test requirements).",
    ),
    test_deps: str = typer.Option("", help="Extra test requirements, comma-separated."),
    no_install: bool = typer.Option(
        False, "--no-install", help="Run tests on the host's pytest without installing the repo."
    ),
    repo_name: str = typer.Option(None, help="owner/name (default: from the git remote)."),
    fresh: bool = typer.Option(False, "--fresh", help="Recompute instead of resuming --out."),
    runs: int = typer.Option(3, help="Test runs per repository state (flaky tests dropped)."),
    workers: int = typer.Option(2, help="Candidates validated in parallel."),
    max_commits: int = typer.Option(200, help="Newest commits scanned for fixes."),
    timeout: float = typer.Option(300, help="Seconds per pytest run."),
    seed: int = typer.Option(0, help="Seed of the mutant choice."),
    backend: str = typer.Option("bwrap", help="Sandbox backend."),
    allow_empty: bool = typer.Option(
        False, "--allow-empty", help="Exit 0 even when every candidate is dropped."
    ),
    llm_url: str = TaskLLMUrl,
    llm_model: str = TaskLLMModel,
    llm_key_env: str = TaskLLMKey,
) -> None:
    """SWE-bench instances from a git repo: fix commits (one, a range, or the newest), SWE-bench
    records, or synthetic bugs. Reruns into the same --out resume (--fresh recomputes).
    Exits 1, saying why on stderr, when every candidate is dropped (unless --allow-empty)."""
    from arcforge.envs.swe_venv import InstallSpec
    from arcforge.synth import swe_git as G
    from arcforge.synth.knowledge import make_client
    from arcforge.synth.swe import SWESynthConfig, synthesize_bugs, synthesize_from_repo
    from arcforge.synth.swe_meta import repo_slug

    if records is not None and not records.is_file():
        raise UserError(f"--records {records}: no such file")
    if runs < 1 or bugs < 0:
        raise UserError("--runs must be >= 1 and --bugs >= 0")
    if sum(bool(x) for x in (commit, commits, records, bugs)) > 1:
        raise UserError("give one of --commit, --commits, --records and --bugs")
    if no_install and (install or test_deps):
        raise UserError("--no-install cannot be combined with --install or --test-deps")
    top = G.check_repo(repo)
    shas = None
    if commit:
        shas = [G.resolve_commit(top, c) for c in commit]
    elif commits:
        shas = G.range_commits(top, commits)
    try:
        repo_slug(top, repo_name)
    except ValueError as err:
        raise UserError(str(err)) from None
    cfg = SWESynthConfig(
        runs=runs,
        backend=backend,
        timeout=timeout,
        workers=workers,
        llm=make_client(llm_url, llm_model, llm_key_env or None),
        max_commits=max_commits,
        max_bugs=bugs,
        seed=seed,
        commits=shas,
        install=InstallSpec(
            install, tuple(t.strip() for t in test_deps.split(",") if t.strip()), not no_install
        ),
        repo_name=repo_name,
    )
    if bugs:
        recs, path = synthesize_bugs(repo, out, cfg)
    else:
        recs, path = synthesize_from_repo(repo, out, cfg, records, fresh=fresh)
    steps = json.loads((out / "summary.json").read_text())["steps"]
    resumed = steps[0].get("resumed", 0) if steps else 0
    if resumed:
        typer.echo(
            f"resumed {resumed} of {steps[0]['in']} candidates already decided in {out} "
            "(--fresh recomputes them)",
            err=True,
        )
    res = {"instances": len(recs), "out": str(path), "resumed": resumed, "steps": _summary(out)}
    if (out / "drops.jsonl").is_file():
        res["drops"] = str(out / "drops.jsonl")
    typer.echo(json.dumps(res))
    if not recs and not allow_empty:
        _explain_empty(out)
        raise typer.Exit(1)


def _explain_empty(out: Path) -> None:
    """Why no instance came out: each drop reason with its count, on stderr."""
    reasons: dict[str, int] = {}
    drops = out / "drops.jsonl"
    for line in drops.read_text().splitlines() if drops.is_file() else []:
        try:
            why = str(json.loads(line).get("reason", "unknown"))[:200]
        except json.JSONDecodeError:
            continue
        reasons[why] = reasons.get(why, 0) + 1
    typer.echo("no instance: every candidate was dropped", err=True)
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        typer.echo(f"- {n} x {why}", err=True)
    if not reasons:
        typer.echo("- no candidate fix commit was found", err=True)
    typer.echo("(--allow-empty exits 0 instead)", err=True)


def _lines(path: Path | None) -> list[str]:
    """Seeds: one per line, or JSONL objects with an "instruction"."""
    if path is None:
        return []
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        s = line.strip()
        if s.startswith("{"):
            try:
                s = json.loads(s)["instruction"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise UserError(
                    f'{path}:{n}: expected a line of text or {{"instruction"}}'
                ) from None
        if s:
            out.append(s)
    return out


def _pages(path: Path | None) -> list[dict]:
    """Web pages: JSONL of {url, title, text | html}."""
    from arcforge.synth.knowledge import read_jsonl

    pages = read_jsonl(path, "pages") if path is not None else []
    for n, page in enumerate(pages, 1):
        if not isinstance(page.get("text") or page.get("html"), str):
            raise UserError(f'{path}: page {n}: expected {{"url", "title", "text" or "html"}}')
    return pages


@synth_app.command("terminal")
def terminal_cmd(
    out: Path = typer.Option(..., "--out", help="Output dir (tasks/, journals, summary.json)."),
    seed: list[str] = typer.Option([], "--seed", help="A seed task instruction (repeatable)."),
    seeds: Path = typer.Option(None, help="File of seeds: one per line or JSONL {instruction}."),
    pages: Path = typer.Option(None, help="JSONL of web pages {url, title, text|html}."),
    world_seeds: int = typer.Option(0, help="Also take N terminal tasks of the world as seeds."),
    config: Path = typer.Option(None, help="Run config whose world gives --world-seeds."),
    n: int = typer.Option(5, help="Variants drafted per seed."),
    repair_rounds: int = typer.Option(3, help="Self-repair rounds per task."),
    runs: int = typer.Option(5, help="Refine runs: oracle n/n, empty 0/n."),
    probes: str = typer.Option("", help="Comma-separated probes for refine (default: all)."),
    workers: int = typer.Option(2),
    backend: str = typer.Option("bwrap", help="Sandbox backend."),
    llm_url: str = TaskLLMUrl,
    llm_model: str = TaskLLMModel,
    llm_key_env: str = TaskLLMKey,
) -> None:
    """Terminal tasks (Harbor dirs) from seeds and web pages: LLM drafts, construction agent,
    self-repair, refine (stability + exploit probes)."""
    from arcforge.synth.knowledge import make_client
    from arcforge.synth.terminal import TerminalSynthConfig, synthesize_terminal

    if not llm_url:
        raise UserError("synth terminal needs an LLM: pass --llm-url (e.g. of `arcforge serve`)")
    all_seeds = list(seed) + _lines(seeds)
    if world_seeds:
        w = setup_world(config)
        all_seeds += [t.instruction for t in w.tasks("terminal", "train")[:world_seeds]]
    all_pages = _pages(pages)
    if not all_seeds and not all_pages:
        raise UserError("give seeds (--seed, --seeds, --world-seeds) or --pages")
    cfg = TerminalSynthConfig(
        llm=make_client(llm_url, llm_model, llm_key_env or None),
        n_variants=n,
        repair_rounds=repair_rounds,
        runs=runs,
        workers=workers,
        probes=[p for p in probes.split(",") if p] or None,
        backend=backend,
    )
    recs = synthesize_terminal(out, cfg, all_seeds, all_pages)
    typer.echo(json.dumps({"tasks": len(recs), "out": str(out / "tasks"), "steps": _summary(out)}))


@synth_app.command("export")
def export_cmd(
    tasks: list[Path] = typer.Option(
        [], "--tasks", help="SWE instance JSONL, Task JSONL, or (a dir of) task dirs; repeatable."
    ),
    trajectories: Path = typer.Option(None, help="Trajectory JSONL to filter into SFT data."),
    sft: Path = typer.Option(None, "--sft", help="SFT JSONL to write."),
    rl: Path = typer.Option(None, "--rl", help="RL task pool (Task JSONL) to write."),
    min_steps: int = typer.Option(1, help="Fewest tool-calling turns kept in SFT."),
    max_steps: int = typer.Option(50, help="Most tool-calling turns kept in SFT."),
    backend: str = typer.Option("bwrap", help="Sandbox backend recorded in the RL pool."),
) -> None:
    """Export SFT JSONL (clean passing trajectories) and/or an RL task pool."""
    from arcforge.synth.export import export_rl_pool, export_sft, load_tasks, read_trajectories

    if sft is None and rl is None:
        raise UserError("nothing to export: pass --sft and/or --rl")
    res: dict = {}
    if sft is not None:
        if trajectories is None:
            raise UserError("--sft needs --trajectories")
        res["sft"] = export_sft(
            read_trajectories(trajectories), sft, min_steps=min_steps, max_steps=max_steps
        )
    if rl is not None:
        if not tasks:
            raise UserError("--rl needs --tasks")
        res["rl"] = export_rl_pool([t for p in tasks for t in load_tasks(p)], rl, backend)
    typer.echo(json.dumps(res))


@synth_app.command("rejection")
def rejection_cmd(
    checkpoint: Path = typer.Argument(..., help="The checkpoint to sample from."),
    out: Path = typer.Option(..., "--out", help="SFT JSONL to write."),
    source: str = typer.Option("world:reasoning", help="Prompt source (tasks with answers)."),
    config: Path = typer.Option(None, help="Run config whose world resolves world: sources."),
    k: int = typer.Option(8, help="Samples per problem."),
    lo: float = typer.Option(0.1, help="Lowest pass rate kept (harder dropped as unsolved)."),
    hi: float = typer.Option(0.9, help="Highest pass rate kept (easier dropped as too easy)."),
    limit: int = typer.Option(200, help="Problems to try."),
    keep_per_problem: int = typer.Option(1),
    max_new_tokens: int = typer.Option(96),
    temperature: float = typer.Option(1.0),
    seed: int = typer.Option(0),
) -> None:
    """Rejection sampling for SFT: keep verified replies of problems inside the pass-rate band."""
    from arcforge.config import SourceCfg
    from arcforge.stages.rl import load_prompt_records
    from arcforge.synth.rejection import rejection_sample

    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    load = source_loader(config)
    recs = load_prompt_records([SourceCfg(source=source)], seed, "synth", load=load)[:limit]
    tasks = [r.task for r in recs if r.task]
    if not tasks:
        raise UserError(f"source {source!r} gave no task with a reference answer")
    res = rejection_sample(
        checkpoint,
        tasks,
        k,
        out,
        band=(lo, hi),
        keep_per_problem=keep_per_problem,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    typer.echo(json.dumps(res.counts))


@synth_app.command("search")
def search_cmd(
    out: Path = typer.Option(..., "--out", help="Output dir (tasks, wkg, summary)."),
    config: Path = WorldCfgOpt,
    pages: Path = typer.Option(None, help="Pages JSONL ({id, title, text}) instead of the world."),
    n: int = typer.Option(20, help="Search tasks wanted."),
    attempts: int = typer.Option(2000, help="Path drafts sampled at most."),
    hops: str = typer.Option("3,4", help="Comma-separated hop counts."),
    paraphrase: bool = typer.Option(False, help="LLM paraphrase of template questions."),
    llm_pages: int = typer.Option(0, help="Free-text pages sent to the LLM extractor (-1: all)."),
    checkpoint: Path = typer.Option(
        None,
        help="A local checkpoint run as a search agent: questions it answers within 2 "
        "searches are dropped (the model-based 2-search filter).",
    ),
    seed: int = typer.Option(0),
    llm_url: str = KnowledgeLLMUrl,
    llm_model: str = KnowledgeLLMModel,
    llm_key_env: str = KnowledgeLLMKey,
) -> None:
    """Multi-hop search tasks from a web knowledge graph, filtered by difficulty and uniqueness."""
    from arcforge.synth.knowledge import load_pages, make_client, run_search
    from arcforge.synth.search import SearchSynthConfig

    try:
        hop_list = tuple(int(h) for h in hops.split(","))
    except ValueError:
        raise UserError(f"--hops must be comma-separated integers, got {hops!r}") from None
    cfg = SearchSynthConfig(n=n, attempts=attempts, hops=hop_list, paraphrase=paraphrase, seed=seed)
    client = make_client(llm_url, llm_model, llm_key_env)
    src = {"pages": load_pages(pages)} if pages else {"world": setup_world(config)}
    cap = None if llm_pages < 0 else llm_pages
    engine = None
    if checkpoint is not None:
        from arcforge.eval.evaluator import load_engine

        _, tok, local = load_engine(checkpoint)
        engine = (local, tok)
    summary = run_search(out, cfg=cfg, client=client, llm_pages=cap, engine=engine, **src)
    typer.echo(json.dumps({"kept": summary["kept"], "hops": summary["hops"]}))


@synth_app.command("abe")
def abe_cmd(
    out: Path = typer.Option(..., "--out", help="Output directory (tasks.jsonl, summary.json)."),
    config: Path = WorldCfgOpt,
    descriptions: Path = typer.Option(None, help="Task descriptions (LLM route), not the world."),
    n: int = typer.Option(20, help="Tool environments wanted."),
    ops: str = typer.Option(
        "generalize,add_parameters,generalize_types,distractors",
        help="Complexity-scaling ops (each applied with p=0.5).",
    ),
    seed: int = typer.Option(0),
    llm_url: str = KnowledgeLLMUrl,
    llm_model: str = KnowledgeLLMModel,
    llm_key_env: str = KnowledgeLLMKey,
) -> None:
    """ABE tool environments (four scenarios) deployed as local functions: Task(kind="abe")."""
    from arcforge.synth.knowledge import load_descriptions, make_client, run_abe

    client = make_client(llm_url, llm_model, llm_key_env)
    descs = load_descriptions(descriptions) if descriptions else None
    world = None if descs is not None else setup_world(config)
    op_list = tuple(o for o in ops.split(",") if o)
    summary = run_abe(out, n, seed, world, descs, client, op_list)
    typer.echo(json.dumps({"kept": summary["kept"], "scenarios": summary["scenarios"]}))


@synth_app.command("gem")
def gem_cmd(
    out: Path = typer.Option(..., "--out", help="Output directory (sft.jsonl, summary.json)."),
    config: Path = WorldCfgOpt,
    texts: Path = typer.Option(None, help="JSONL with 'text', a .txt/.md file or a directory."),
    limit: int = typer.Option(None, help="Texts to read at most."),
    refine: bool = typer.Option(True, help="Refine the trajectories."),
    llm_url: str = KnowledgeLLMUrl,
    llm_model: str = KnowledgeLLMModel,
    llm_key_env: str = KnowledgeLLMKey,
) -> None:
    """GEM: tool-use trajectories (SFT records) from texts that describe procedures."""
    from arcforge.synth.knowledge import load_texts, make_client, run_gem, world_texts

    client = make_client(llm_url, llm_model, llm_key_env)
    items = load_texts(texts) if texts else world_texts(setup_world(config))
    summary = run_gem(out, items, client, refine, limit)
    dropped = {k: v["dropped"] for k, v in summary["steps"].items() if v["dropped"]}
    typer.echo(json.dumps({"kept": summary["kept"], "dropped": dropped}))
