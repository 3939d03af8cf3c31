"""The `world:<suite>[:split]` data source: the embedded world's pools as records.

`WORLD_SOURCES` maps a suite name to the builder of its records; `name/*` entries also take
`name/<variant>` (`episodes/terminal`, `sft/tool`, `agent_docs/tir`). A suite with no entry is
a task suite (`world.tasks(suite, split)`, or its `unseen` train tasks).

The data layer never sees the world: `run_records(ctx, spec)` hands `load_records` a resolver
bound to the run's world (built on first use) together with the run's directory, and
`world_resolver(world)` does the same for a world built outside a run (the CLI, audits).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from arcforge.data.midtrain import repo_sequence, synthetic_long_doc
from arcforge.data.sources import (
    OnError,
    Record,
    SourceSpec,
    WorldResolver,
    load_records,
    record_from_dict,
    record_from_task,
)
from arcforge.errors import ConfigError
from arcforge.rollout.agent import AgentConfig
from arcforge.stages.context import RunContext
from arcforge.synth.episodes import KIND_SUITE, EpisodeDemo, world_episodes
from arcforge.synth.swarm_episodes import swarm_episodes

# (world, the run or None, suite, split) -> records
WorldBuilder = Callable[[Any, RunContext | None, str, str | None], list[Record]]


def _episodes(world, ctx: RunContext | None, suite: str, kinds: list[str] | None) -> list:
    """The run's expert episodes (`world_episodes`, generated once and cached) of `kinds`, or
    of every kind with a count; `suite` names the source in errors."""
    if ctx is None:
        raise ConfigError(f"world:{suite} needs a run (its tokenizer and run dir)")
    for kind in kinds or []:
        if kind not in KIND_SUITE:
            raise ConfigError(f"world:{suite}: unknown kind {kind!r}; known: {sorted(KIND_SUITE)}")
    wc, ev = world.config, ctx.cfg.eval
    counts = {k: wc.n(getattr(wc.episodes, k), 0) for k in KIND_SUITE}
    acfg = AgentConfig(
        max_turns=ev.max_turns,
        max_new_tokens=ev.max_new_tokens,
        context_budget=ctx.cfg.model.max_position_embeddings,
    )
    demos, stats = world_episodes(
        world, ctx.tokenizer, ctx.run_dir / "world" / "episodes", counts, acfg, kinds, seed=wc.seed
    )
    for k, st in stats.items():
        if not st.get("cached"):
            split = st.get("split_by_compaction", 0)
            print(
                f"[world] expert episodes {k}: {st['conversations']}/"
                f"{st['conversations_requested']} conversations"
                f"{f' ({split} episodes split in two by compaction)' if split else ''}, "
                f"rejected {st['rejected']}, {st['seconds']:.0f}s"
            )
    return demos


def _episode_record(demo) -> Record:
    """An expert episode (an EpisodeDemo) as an SFT record: its messages, the tools it offered
    (names and schemas), its thinking mode and kind."""
    return Record(
        messages=demo.messages,
        origin=f"world:episodes#{demo.id}",
        meta={
            "tools": [tool.name for tool in demo.tools],
            "mode": demo.mode,
            "kind": demo.kind,
            "tool_schemas": [tool.schema()["function"] for tool in demo.tools],
        },
    )


def episode_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:episodes[/kind]`: scripted experts' verified episodes in the real environments,
    on TRAIN tasks only, generated once per run with the run's tokenizer and cached in
    RUN_DIR/world/episodes/ (counts: world.options.episodes, times world.scale). Episodes
    get the eval agent's budgets (eval.max_turns, eval.max_new_tokens, the model context)."""
    if split not in (None, "train"):
        raise ConfigError(f"world:{suite}:{split}: expert episodes come from train tasks only")
    kind = suite.split("/", 1)[1] if "/" in suite else None
    return [_episode_record(d) for d in _episodes(world, ctx, suite, [kind] if kind else None)]


def swarm_episode_records(
    world, ctx: RunContext | None, suite: str, split: str | None
) -> list[Record]:
    """`world:episodes/swarm`: the scripted orchestrator's verified episodes over the scripted
    search subagents (arcforge.synth.swarm_episodes) on TRAIN wide tasks, generated once per
    run and cached in RUN_DIR/world/episodes/swarm.jsonl (count: world.options.episodes.swarm,
    times world.scale). The orchestrator gets the eval's turn budget, four times its reply
    length (its first reply assigns every item) and the model's context."""
    if split not in (None, "train"):
        raise ConfigError(
            f"world:episodes/swarm:{split}: expert episodes come from train tasks only"
        )
    if ctx is None:
        raise ConfigError("world:episodes/swarm needs a run (its tokenizer and run dir)")
    wc, ev = world.config, ctx.cfg.eval
    n = wc.n(wc.episodes.swarm, 0)
    if n <= 0:
        raise ConfigError(
            "world:episodes/swarm: world.options.episodes.swarm is 0; set how many to record"
        )
    budget = ctx.cfg.model.max_position_embeddings
    cfg = AgentConfig(
        max_turns=ev.max_turns,
        max_new_tokens=min(4 * ev.max_new_tokens, budget // 2),
        context_budget=budget,
    )
    sub = AgentConfig(
        max_turns=ev.max_turns, max_new_tokens=ev.max_new_tokens, context_budget=budget
    )
    key = {"n": n, "seed": wc.seed, "orchestrator": asdict(cfg), "subagent": asdict(sub)}
    cache = ctx.run_dir / "world" / "episodes"
    meta_path, data_path = cache / "swarm.json", cache / "swarm.jsonl"
    if meta_path.exists() and json.loads(meta_path.read_text()).get("key") == key:
        lines = data_path.read_text().splitlines()
        demos = [EpisodeDemo.from_dict(json.loads(ln)) for ln in lines if ln.strip()]
    else:
        demos, stats = swarm_episodes(world, ctx.tokenizer, n, cfg, sub)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = data_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in demos))
        tmp.replace(data_path)
        meta_path.write_text(json.dumps({"key": key, "stats": stats}, indent=1))
        print(
            f"[world] expert episodes swarm: {stats['episodes_kept']}/{stats['episodes']} "
            f"kept, rejected {stats['rejected']}"
        )
    return [_episode_record(d) for d in demos]


def unseen_tasks(world, ctx: RunContext | None, suite: str) -> list:
    """`world:<suite>:unseen`: the suite's TRAIN tasks that no SFT demo (`world:sft`) and no
    expert episode (`world:episodes`) of the run shows. RL on tasks SFT showed in the same
    format, answer included, rewards recall rather than skill (docs/experiments.md)."""
    kinds = [k for k, s in KIND_SUITE.items() if suite in (k, s)]  # tir episodes: reasoning tasks
    seen = {i for d in world.sft_demos() for i in d.shown()}
    if kinds:
        seen |= {i for d in _episodes(world, ctx, f"{suite}:unseen", kinds) for i in d.task_ids}
    tasks = [t for t in world.tasks(suite, "train") if t.id not in seen]
    if not tasks:
        raise ConfigError(
            f"world:{suite}:unseen: every train task of {suite!r} is shown in an "
            f"SFT demo or expert episode; generate more (world.options.tasks)"
        )
    return tasks


def task_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:<task suite>[:split]`: the suite's tasks of the split (default train), or with
    `unseen` its train tasks no demo or episode of the run shows."""
    if split == "unseen":
        tasks = unseen_tasks(world, ctx, suite)
    else:
        try:
            tasks = world.tasks(suite, split or "train")
        except ValueError as err:  # an unknown suite or split, a suite without fresh tasks
            raise ConfigError(f"world:{suite}:{split}: {err}") from None
    return [record_from_task(t, f"world:{suite}#{t.id}") for t in tasks]


def swarm_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:swarm`: wide search tasks for the orchestrator (arcforge.world.tasks.wide_search)."""
    from arcforge.world.tasks.wide_search import swarm_tasks

    try:
        tasks = swarm_tasks(world, split or "train")
    except ValueError as err:
        raise ConfigError(f"world:swarm:{split}: {err}") from None
    return [record_from_task(t, f"world:swarm#{t.id}") for t in tasks]


def corpus_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:corpus` and `world:heldout`: the pretraining corpus and its held-out part."""
    docs = world.corpus() if suite == "corpus" else world.heldout_corpus()
    return [Record(text=d.text, origin=f"world:{suite}#{d.id}") for d in docs]


def repo_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:repos`: each repo with an injected bug as repo + issue + fix-diff text; repos
    behind held-out SWE tasks stay out of training data."""
    held = {t.context.get("repo") for t in world.tasks("swe", "test")}
    out = []
    for repo in (r for r in world.repos if r.name not in held):
        bug = repo.inject_bug(random.Random(repo.name))
        files = {**repo.files, **repo.tests}
        out.append(
            Record(
                text=repo_sequence(files, bug.issue_text, bug.fix_diff),
                origin=f"world:repos#{repo.name}",
            )
        )
    return out


def long_context_records(
    world, ctx: RunContext | None, suite: str, split: str | None
) -> list[Record]:
    """`world:long_context`: one document per item, "{text}\\n\\nQuestion: {q}\\nAnswer: {a}",
    the probe's format, over the world's long-context sizes."""
    sizes = world.config.long_context_chars
    items = [
        it
        for k, size in enumerate(sizes)
        for it in world.long_context(
            n=max(20, 600 // len(sizes)), target_chars=size, split=split or "train", seed=k
        )
    ]
    return [
        Record(text=synthetic_long_doc([it]), origin=f"world:long_context#{i}")
        for i, it in enumerate(items)
    ]


def agent_doc_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:agent_docs[/kind,...]`: how-tos written from TRAIN tasks."""
    from arcforge.world.text.agent_docs import KINDS, agent_docs

    if split not in (None, "train"):
        raise ConfigError(f"world:{suite}:{split}: agent docs come from train tasks only")
    kinds = tuple(suite.split("/", 1)[1].split(",")) if "/" in suite else KINDS
    try:
        docs = agent_docs(world, kinds)
    except ValueError as err:
        raise ConfigError(f"world:{suite}: {err}") from None
    return [Record(text=text, origin=f"world:agent_docs#{i}") for i, text in docs]


def preference_records(
    world, ctx: RunContext | None, suite: str, split: str | None
) -> list[Record]:
    """`world:preferences`: chosen/rejected replies to chat tasks (reward-model training)."""
    from arcforge.world.text.preferences import preference_pairs

    tasks = world.tasks("chat", split or "train")
    return [
        record_from_dict(p.to_dict(), f"world:preferences#{p.id}")
        for p in preference_pairs(tasks, world.config.seed, per_task=2)
    ]


def sft_records(world, ctx: RunContext | None, suite: str, split: str | None) -> list[Record]:
    """`world:sft[/kind]`: the world's scripted SFT demos (of one kind)."""
    kind = suite.split("/", 1)[1] if "/" in suite else None
    return [
        Record(
            messages=d.messages, origin=f"world:sft#{d.id}", meta={"tools": d.tools, "mode": d.mode}
        )
        for d in world.sft_demos()
        if kind is None or d.kind == kind
    ]


WORLD_SOURCES: dict[str, WorldBuilder] = {
    "episodes": episode_records,
    "episodes/*": episode_records,
    "episodes/swarm": swarm_episode_records,
    "swarm": swarm_records,
    "corpus": corpus_records,
    "heldout": corpus_records,
    "repos": repo_records,
    "long_context": long_context_records,
    "agent_docs": agent_doc_records,
    "agent_docs/*": agent_doc_records,
    "preferences": preference_records,
    "sft": sft_records,
    "sft/*": sft_records,
}


def world_records(
    world, suite: str, split: str | None, ctx: RunContext | None = None
) -> list[Record]:
    """Resolve `world:<suite>[:split]` into records through `WORLD_SOURCES` (`ctx`: the run,
    for `world:episodes` and the `unseen` split of a task suite)."""
    builder = WORLD_SOURCES.get(suite) or WORLD_SOURCES.get(f"{suite.split('/', 1)[0]}/*")
    return (builder or task_records)(world, ctx, suite, split)


def world_resolver(world, ctx: RunContext | None = None) -> WorldResolver:
    """The `world=` resolver `load_records` takes, for `world` (and the run `ctx`, if any)."""
    return lambda suite, split: world_records(world, suite, split, ctx)


def run_records(
    ctx: RunContext, spec: str | SourceSpec, on_error: OnError = "skip"
) -> list[Record]:
    """Every record of one source as the run reads it: `world:` from the run's world (built
    on first use), `{run_dir}` in a path as the run's directory."""
    return load_records(
        spec,
        on_error,
        world=lambda suite, split: world_records(ctx.world, suite, split, ctx),
        run_dir=ctx.run_dir,
    )
