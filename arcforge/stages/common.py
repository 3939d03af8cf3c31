"""Shared stage plumbing: the run context, the world, the tokenizer, `world:` sources and the
starting model.

`RunContext` is what every stage runner gets: the run config, the run dir and the lazily built
world and tokenizer.

`prepare_world` / `prepare_tokenizer` run once per run (cached in RUN_DIR/world and
RUN_DIR/tokenizer). `world:` sources resolve through `world_records`; `model_for_stage` gives a
stage its starting weights (the init checkpoint, the user's local HF model, or a preset).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from arcforge.chat.formats import chat_format
from arcforge.config import BaseRunCfg, EngineCfg, StageCfg
from arcforge.data.curate import curate
from arcforge.data.midtrain import repo_sequence, synthetic_long_doc
from arcforge.data.sources import Record, register_world_resolver
from arcforge.device import run_device, set_run_device
from arcforge.errors import ConfigError, UserError
from arcforge.model.checkpoint import (
    init_model,
    load_model,
    resize_for_tokenizer,
)
from arcforge.model.presets import build_config
from arcforge.model.prime import copy_config_fields, init_for_copying
from arcforge.model.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer
from arcforge.rollout.engine import Engine, make_engine
from arcforge.train.lora import apply_lora, plain_model
from arcforge.train.rl import stop_token_ids


@dataclass
class RunContext:
    """What every stage runner gets: the config, the run dir, the lazily built world/tokenizer."""

    cfg: BaseRunCfg  # an arcforge.run_config.RunCfg: its stages are typed by kind
    run_dir: Path
    _world: object | None = field(default=None, repr=False)
    _tokenizer: object | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        set_run_device(self.cfg.device)  # every model this run opens goes there

    @property
    def world(self):  # -> arcforge.world.World
        if self._world is None:
            self._world = prepare_world(self)
        return self._world

    @property
    def tokenizer(self):  # -> PreTrainedTokenizerFast
        if self._tokenizer is None:
            self._tokenizer = prepare_tokenizer(self)
        return self._tokenizer

    def stage_dir(self, name: str) -> Path:
        return self.run_dir / name

    def checkpoint(self, name: str) -> Path:
        return self.run_dir / name / "checkpoint"

    def init_checkpoint(self, stage: StageCfg) -> Path | None:
        """The checkpoint a stage starts from: `init`, else the previous stage that trains
        (synthesis stages write no checkpoint), else none (`model.path` or a preset)."""
        names = [s.name for s in self.cfg.stages]
        i = names.index(stage.name)
        earlier = [s.name for s in self.cfg.stages[:i] if s.kind != "synth"]
        src = stage.init or (earlier[-1] if earlier else None)
        if src is None:
            return None
        ck = self.checkpoint(src)
        if not (ck / "config.json").exists():
            raise UserError(
                f"stage {stage.name!r} starts from {src!r}, which has no checkpoint yet"
            )
        return ck


def is_main_rank() -> bool:
    """False in the processes of a torchrun launch other than rank 0 (they write no side
    files: the stage's directory is shared)."""
    return int(os.environ.get("RANK", "0")) == 0


# ---- world and tokenizer -------------------------------------------------------------------


def world_config_from_cfg(cfg: BaseRunCfg):  # -> arcforge.world.WorldConfig
    """The WorldConfig a run config asks for (`world.seed`, `world.scale`, `world.options`)."""
    from arcforge.world import WorldConfig

    known = set(WorldConfig.__dataclass_fields__)
    bad = sorted(set(cfg.world.options) - known)
    if bad:
        raise ConfigError(f"world.options: unknown key(s) {bad}; known: {sorted(known)}")
    try:
        return WorldConfig.from_dict(
            {**cfg.world.options, "seed": cfg.world.seed, "scale": cfg.world.scale}
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"world.options: {err}") from None


def build_world_from_cfg(cfg: BaseRunCfg):
    from arcforge.world import build_world

    return build_world(world_config_from_cfg(cfg))


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def check_saved_world(saved, wanted, wdir: Path) -> None:
    """A run's saved world must be the one its config asks for: a config edited after the
    world was generated (more expert episodes, other task counts) would otherwise be ignored
    without a word, since the world is read back from disk."""
    have, want = _flat(saved.to_dict()), _flat(wanted.to_dict())
    diff = [
        f"{k}: {have.get(k)!r} -> {want.get(k)!r}"
        for k in sorted(set(have) | set(want))
        if have.get(k) != want.get(k)
    ]
    if diff:
        raise UserError(
            f"the world in {wdir} was generated with other settings than this config asks for "
            f"({'; '.join(diff[:6])}{' ...' if len(diff) > 6 else ''}); use a new --run-dir, "
            f"or delete {wdir} and the stages after it to regenerate"
        )


def _episodes(world, ctx: RunContext | None, suite: str, kinds: list[str] | None) -> list:
    """The run's expert episodes (`world_episodes`, generated once and cached) of `kinds`, or
    of every kind with a count; `suite` names the source in errors."""
    from arcforge.rollout.agent import AgentConfig
    from arcforge.synth.episodes import KIND_SUITE, world_episodes

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


def swarm_episode_records(world, ctx: RunContext | None, split: str | None) -> list[Record]:
    """`world:episodes/swarm`: the scripted orchestrator's verified episodes over the scripted
    search subagents (arcforge.synth.swarm_episodes) on TRAIN wide tasks, generated once per
    run and cached in RUN_DIR/world/episodes/swarm.jsonl (count: world.options.episodes.swarm,
    times world.scale). The orchestrator gets the eval's turn budget, four times its reply
    length (its first reply assigns every item) and the model's context."""
    import json
    from dataclasses import asdict

    from arcforge.rollout.agent import AgentConfig
    from arcforge.synth.episodes import EpisodeDemo
    from arcforge.synth.swarm_episodes import swarm_episodes

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
    format, answer included, rewards recall: on the demo, agentic RL drew tool tasks from the
    400 train tasks the 400 tool episodes covered, scored 0.19 on them against 0.09 held out,
    and left the held-out tool suite within noise."""
    from arcforge.synth.episodes import KIND_SUITE

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


def world_records(
    world, suite: str, split: str | None, ctx: RunContext | None = None
) -> list[Record]:
    """Resolve `world:<suite>[:split]` into records (`ctx`: the run, for `world:episodes` and
    the `unseen` split of a task suite)."""
    if suite == "episodes/swarm":
        return swarm_episode_records(world, ctx, split)
    if suite == "episodes" or suite.startswith("episodes/"):
        return episode_records(world, ctx, suite, split)
    if suite == "swarm":  # wide search tasks for the orchestrator (arcforge.world.swarm)
        from arcforge.data.sources import record_from_task
        from arcforge.world.swarm import swarm_tasks

        try:
            tasks = swarm_tasks(world, split or "train")
        except ValueError as err:
            raise ConfigError(f"world:swarm:{split}: {err}") from None
        return [record_from_task(t, f"world:swarm#{t.id}") for t in tasks]
    if suite in ("corpus", "heldout"):
        docs = world.corpus() if suite == "corpus" else world.heldout_corpus()
        return [Record(text=d.text, origin=f"world:{suite}#{d.id}") for d in docs]
    if suite == "repos":
        # repos behind held-out SWE tasks stay out of training data
        held = {t.context.get("repo") for t in world.tasks("swe", "test")}
        out = []
        for repo in (r for r in world.repos if r.name not in held):
            bug = repo.inject_bug(__import__("random").Random(repo.name))
            files = {**repo.files, **repo.tests}
            out.append(
                Record(
                    text=repo_sequence(files, bug.issue_text, bug.fix_diff),
                    origin=f"world:repos#{repo.name}",
                )
            )
        return out
    if suite == "long_context":
        # one document per item, "{text}\n\nQuestion: {q}\nAnswer: {a}", the probe's format
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
    if suite == "agent_docs" or suite.startswith("agent_docs/"):  # how-tos from TRAIN tasks
        from arcforge.world.agent_docs import KINDS, agent_docs

        if split not in (None, "train"):
            raise ConfigError(f"world:{suite}:{split}: agent docs come from train tasks only")
        kinds = tuple(suite.split("/", 1)[1].split(",")) if "/" in suite else KINDS
        try:
            docs = agent_docs(world, kinds)
        except ValueError as err:
            raise ConfigError(f"world:{suite}: {err}") from None
        return [Record(text=text, origin=f"world:agent_docs#{i}") for i, text in docs]
    if suite == "preferences":  # chosen/rejected replies to chat tasks (reward-model training)
        from arcforge.data.sources import record_from_dict
        from arcforge.world.preferences import preference_pairs

        tasks = world.tasks("chat", split or "train")
        return [
            record_from_dict(p.to_dict(), f"world:preferences#{p.id}")
            for p in preference_pairs(tasks, world.config.seed, per_task=2)
        ]
    if suite == "sft" or suite.startswith("sft/"):
        kind = suite.split("/", 1)[1] if "/" in suite else None
        return [
            Record(
                messages=d.messages,
                origin=f"world:sft#{d.id}",
                meta={"tools": d.tools, "mode": d.mode},
            )
            for d in world.sft_demos()
            if kind is None or d.kind == kind
        ]
    from arcforge.data.sources import record_from_task

    if split == "unseen":
        tasks = unseen_tasks(world, ctx, suite)
    else:
        try:
            tasks = world.tasks(suite, split or "train")
        except ValueError as err:  # an unknown suite or split, a suite without fresh tasks
            raise ConfigError(f"world:{suite}:{split}: {err}") from None
    return [record_from_task(t, f"world:{suite}#{t.id}") for t in tasks]


def prepare_world(ctx: RunContext):
    from arcforge.world import World

    wdir = ctx.run_dir / "world"
    if (wdir / "DONE").exists():
        world = World.load(wdir)
        check_saved_world(world.config, world_config_from_cfg(ctx.cfg), wdir)
    else:
        print("[world] generating the embedded world ...")
        world = build_world_from_cfg(ctx.cfg)
        world.save(wdir)
        (wdir / "DONE").write_text("ok")
    register_world_resolver(lambda suite, split: world_records(world, suite, split, ctx))
    return world


def resolve_model_path(path: str) -> str:
    """A checkpoint directory, or a registered real checkpoint's name (imported and cached on
    first use, arcforge.model.importer)."""
    if Path(path).exists():
        return path
    from arcforge.model.importer import REGISTRY, real_checkpoint

    if path in REGISTRY:
        return str(real_checkpoint(path))
    raise UserError(
        f"tokenizer/model path not found: {path} (nor a registered checkpoint: {sorted(REGISTRY)})"
    )


def prepare_tokenizer(ctx: RunContext):
    cfg = ctx.cfg
    src = cfg.model.path or cfg.tokenizer.path
    if src:
        src = resolve_model_path(src)
        c = cfg.chat
        try:
            tok, _ = load_tokenizer(src, c.format, c.template_kwargs, c.dialect)
        except ValueError as e:
            raise UserError(f"{src}: {e}") from None
        return tok
    if cfg.chat.format == "native":
        raise UserError(
            "chat.format native needs a checkpoint with its own chat template (model.path or "
            "tokenizer.path); a tokenizer trained here uses arcforge's format"
        )
    tdir = ctx.run_dir / "tokenizer"
    if (tdir / "DONE").exists():
        return load_tokenizer(tdir)[0]
    docs, _ = curate(ctx.world.corpus())
    texts, n = [], 0
    for d in docs:
        if n >= cfg.tokenizer.train_chars:
            break
        texts.append(d.text)
        n += len(d.text)
    print(
        f"[tokenizer] training byte-level BPE ({cfg.tokenizer.vocab_size}, space_split="
        f"{cfg.tokenizer.space_split}) on {n / 1e6:.1f}M chars"
    )
    tok = train_tokenizer(texts, cfg.tokenizer.vocab_size, space_split=cfg.tokenizer.space_split)
    save_tokenizer(tok, tdir)
    (tdir / "DONE").write_text("ok")
    return tok


# ---- model and rollout engine --------------------------------------------------------------


def model_for_stage(ctx: RunContext, stage: StageCfg) -> torch.nn.Module:
    """The stage's starting model: its init checkpoint, the user's model.path, or a preset;
    with the stage's `lora:`, wrapped in LoRA adapters (arcforge.train.lora)."""
    where = f"stage {stage.name!r}"
    return apply_lora(starting_model(ctx, stage), getattr(stage, "lora", None), where, stage.seed)


def starting_model(ctx: RunContext, stage: StageCfg) -> torch.nn.Module:
    """The stage's starting weights: its init checkpoint, the user's model.path, or a preset."""
    ckpt = ctx.init_checkpoint(stage)
    if ckpt is not None:
        return load_model(ckpt)
    m = ctx.cfg.model
    if m.path:
        model = load_model(resolve_model_path(m.path))
        if chat_format(ctx.tokenizer).name == "arcforge":
            resize_for_tokenizer(model, ctx.tokenizer)  # the native format adds no token
        return model
    tok = ctx.tokenizer
    conf = build_config(
        m.preset,
        vocab_size=len(tok),
        max_position_embeddings=m.max_position_embeddings,
        rope_theta=m.rope_theta,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        **(copy_config_fields() if m.prime_induction else {}),
        **m.overrides,
    )
    model = init_model(conf, seed=m.seed)  # on the CPU: the same weights on every device
    if m.prime_induction:
        init_for_copying(model, seed=m.seed)
    return model.to(run_device())


@contextmanager
def rollout_engine(
    cfg: EngineCfg,
    model: torch.nn.Module,
    pad_id: int,
    precision: str,
    max_batch: int,
    routing_replay: bool = False,
) -> Iterator[Engine]:
    """An RL stage's rollout engine (its `engine:`, through `make_engine`) holding `model`'s
    weights, closed on exit (a vLLM server it started stops with it)."""
    engine = make_engine(
        cfg,
        plain_model(model),  # a LoRA model's merged copy, under the base model's names
        pad_token_id=pad_id,
        precision=precision,
        max_batch=max_batch,
        routing_replay=routing_replay,
    )
    try:
        yield engine
    finally:
        close = getattr(engine, "close", None)  # the LocalEngine holds nothing to release
        if close is not None:
            close()


def trainer_options(ctx: RunContext, stage: StageCfg, label: str) -> dict[str, Any]:
    """The keyword arguments an on-policy trainer (`train_rl`, `train_distill`) takes from the
    run: the tokenizer's pad and stop ids, the progress label (`label` and the stage's name),
    the run's logging sinks and the run name its trackers show."""
    tok = ctx.tokenizer
    return {
        "pad_id": tok.pad_token_id or 0,
        "stop_ids": stop_token_ids(tok),
        "desc": f"{label} {stage.name}",
        "logging": ctx.cfg.logging,
        "run_name": f"{ctx.cfg.name}/{stage.name}",
    }


def row_mean(rows: list[dict], key: str) -> float:
    """The mean of `key` over metric rows (a row without it counts 0; 0 for no rows)."""
    return sum(row.get(key, 0.0) for row in rows) / max(1, len(rows))


def first_and_last_fifth(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The first and the last fifth of a stage's metric rows (at least one row each, when there
    are rows): where a stage summary reads how training started and ended."""
    k = max(1, len(rows) // 5)
    return rows[:k], rows[-k:]


def grpo_summary(stage: StageCfg, prompts: list, rows: list[dict]) -> dict[str, Any]:
    """The summary a GRPO stage (rl, general_rl) reports from `train_rl`'s metric rows: steps,
    prompt pool size, mean reward over the first and last fifth, groups dropped for uniform
    rewards, generation speed."""
    first, last = first_and_last_fifth(rows)
    return {
        "steps": stage.steps,
        "prompts": len(prompts),
        "reward_first": row_mean(first, "reward_mean"),
        "reward_last": row_mean(last, "reward_mean"),
        "dropped_uniform": sum(row["dropped_uniform"] for row in rows),
        "tokens_per_s": row_mean(rows, "tokens_per_s"),
    }
