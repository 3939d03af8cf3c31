"""Expert episodes: SFT conversations recorded from scripted experts acting in the real envs.

The scripted experts of arcforge.rollout.policies (`expert_engine`) run through `run_episodes`
in the same environments the eval suites and agentic RL use (bwrap sandboxes for tir, code,
terminal and swe; the world's real tools for tool and search), so every tool output in the
data is what the environment returned. An episode is kept only when it finished with an
answer, verify() gave reward 1 and nothing failed to parse; the rest are counted by reason.
Kept episodes become conversations (the env's opening messages and the episode's messages;
tool observations are masked by the chat template, and the env's tool schemas travel with
them so the SFT prompt matches the one the agent saw). An episode the agent loop compacted
once (old observations folded to fit the context budget) becomes the two views its replies
were sampled in (`episode_views`); one compacted twice is rejected.

Thinking modes, as the template demos of arcforge.world.text.demos use them:
- interleaved: one episode, thinking before every step;
- preserved / dropped: two episodes of the kind joined as a two-user-turn conversation (the
  SFT stage keeps or drops the first turn's thinking, see arcforge.chat.template);
- turn_level: the second of two episodes (or the only one, for kinds too long to pair: search,
  code, terminal, swe) runs with thinking off for its user turn, so its replies have no
  reasoning.
Simplification: the second episode of a pair ran in its own environment, not after the
first; its observations are real, and the scripted expert's replies do not depend on context.

`world_episodes` builds them from a world's TRAIN tasks only and caches each kind under a
directory (one JSONL plus a JSON of counts, written last), so a rerun reuses them.
"""

from __future__ import annotations

import copy
import json
import queue
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from arcforge.envs.base import Environment
from arcforge.envs.search_env import normalize_answer
from arcforge.progress import progress
from arcforge.rollout.agent import AgentConfig, episode_to_messages, run_episodes
from arcforge.rollout.policies import EXPERT_VERSIONS, ScriptedEngine, expert_engine
from arcforge.types import Message, Task, Tool, Trajectory
from arcforge.world.text.demos import MODES

KIND_SUITE = {
    "tool": "tool",
    "search": "search",
    "tir": "reasoning",
    "code": "code",
    "terminal": "terminal",
    "swe": "swe",
}
SINGLE = ("interleaved", "turn_level")
KIND_MODES = {
    "tool": MODES,
    "tir": MODES,
    "search": SINGLE,
    "code": SINGLE,
    "terminal": SINGLE,
    "swe": ("interleaved",),
}
PAIR_KINDS = {"tool", "tir"}  # search/code/terminal/swe episodes are too long to pair
PAIRED = ("preserved", "dropped", "turn_level")
Slot = tuple[str, bool]  # (task id, thinking on)
EPISODE_FORMAT = 2  # cache format: 2 keeps argument order (1 sorted every key)


@dataclass
class EpisodeDemo:
    """One SFT conversation made of one or two verified expert episodes."""

    id: str
    kind: str
    mode: str
    task_ids: list[str]
    messages: list[Message]
    tools: list[Tool] = field(default_factory=list)  # schemas only (fn is None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "mode": self.mode,
            "task_ids": self.task_ids,
            "messages": [m.to_dict() for m in self.messages],
            "tools": [t.schema()["function"] for t in self.tools],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeDemo:
        tools = [Tool(t["name"], t["description"], t["parameters"]) for t in d["tools"]]
        msgs = [Message.from_dict(m) for m in d["messages"]]
        return cls(d["id"], d["kind"], d["mode"], list(d["task_ids"]), msgs, tools)


def _plan(tasks: list[Task], kind: str, n: int, rng: random.Random) -> list[tuple[str, list[Slot]]]:
    """`n` conversations: (mode, slots), tasks taken from a shuffled cycle over the pool."""
    order = list(tasks)
    rng.shuffle(order)
    modes, out, k = KIND_MODES.get(kind, ("interleaved",)), [], 0
    for i in range(n):
        mode = modes[i % len(modes)]
        paired = mode in PAIRED and kind in PAIR_KINDS and len(order) > 1
        picks = [order[(k + j) % len(order)] for j in range(2 if paired else 1)]
        k += len(picks)
        # turn_level: the last (or only) user turn runs with thinking off
        think = [not (mode == "turn_level" and j == len(picks) - 1) for j in range(len(picks))]
        out.append((mode, [(t.id, on) for t, on in zip(picks, think)]))
    return out


def reject_reason(traj: Trajectory) -> str | None:
    """Why an expert episode is not SFT data (None: it is)."""
    agent = traj.reward_details.get("agent", {})
    if traj.finish_reason != "answer":
        return traj.finish_reason  # error / length / context / max_turns
    if agent.get("parse_errors", 0):
        return "parse_errors"
    if agent.get("compactions", 0) > 1:  # a middle view of the context is not recorded
        return "compacted_twice"
    if traj.reward < 1.0:
        return "reward<1"
    return None if _grounded(traj) else "ungrounded"


def _grounded(traj: Trajectory) -> bool:
    """False when the episode calls `answer` (search) with a text no earlier tool observation
    showed: the scripted expert knows the answer from the task, and the search results it
    learns from must show it (2 of 300 demo train tasks do not, an "occupation" fact written
    "works as")."""
    seen = ""
    for m in traj.messages:
        if m.role == "tool":
            seen += " " + normalize_answer(m.content)
        for c in m.tool_calls:  # only assistant messages carry calls
            if (
                c.name == "answer"
                and normalize_answer(str(c.arguments.get("text", ""))) not in seen
            ):
                return False
    return True


def episode_views(traj: Trajectory, tokenizer: Any) -> list[list[Message]]:
    """The episode as conversations in which every assistant turn is trained once, in the
    context the agent loop showed when it replied.

    Without a compaction that is `traj.messages`. After one compaction (the agent folded old
    observations to fit the context budget) it is two: the history up to the last reply before
    the compaction, and the compacted context the later replies saw (`episode_to_messages`),
    with the earlier replies in it kept as context but not trained (train=False).
    """
    if not traj.reward_details.get("agent", {}).get("compactions", 0):
        return [list(traj.messages)]
    later = sum(s.source == "model" for s in traj.segments)  # replies sampled after it
    asst = [i for i, m in enumerate(traj.messages) if m.role == "assistant"]
    before = len(asst) - later
    views = [list(traj.messages[: asst[before - 1] + 1])] if before > 0 else []
    final = episode_to_messages(traj, tokenizer)
    # the last `later` replies of the view were sampled in it (compaction may have dropped
    # some earlier ones as old progress notes)
    k = sum(m.role == "assistant" for m in final) - later
    users = iter(m for m in traj.messages if m.role == "user")
    for i, m in enumerate(final):
        if m.role == "user":  # restore the per-turn thinking switch the stream implies
            final[i] = replace(m, thinking=next(users).thinking)
        elif m.role == "assistant":
            final[i], k = replace(m, train=k <= 0), k - 1
    return views + [final]


def _run_part(
    part: list[Slot],
    by_id: dict[str, Task],
    tok: Any,
    engine: Any,
    env_factory: Callable[[Task], Environment],
    cfg: AgentConfig,
) -> list[tuple[Slot, Trajectory, list[Tool]]]:
    """One chunk of slots: thinking-on episodes, then thinking-off ones (turn_thinking=False)."""
    made: list[Environment] = []

    def factory(task: Task) -> Environment:
        made.append(env_factory(task))
        return made[-1]

    out = []
    for think in (True, False):
        sub = [s for s in part if s[1] == think]
        if not sub:
            continue
        made.clear()
        acfg = cfg if think else replace(cfg, turn_thinking=False)
        trajs = run_episodes(engine, tok, factory, [by_id[i] for i, _ in sub], acfg)
        out += [(s, tr, _schemas(env)) for s, tr, env in zip(sub, trajs, made)]
    return out


def _run_slots(
    slots: list[Slot],
    by_id: dict[str, Task],
    tokenizer: Any,
    env_factory: Callable[[Task], Environment],
    cfg: AgentConfig,
    chunk: int,
    workers: int,
    desc: str,
) -> dict[Slot, tuple[Trajectory, list[Tool]]]:
    """Every slot's episode (and the env's tools), `chunk` episodes per run_episodes call.

    Each thread gets its own tokenizer copy: a fast tokenizer call toggles shared state
    (`split_special_tokens`), so one tokenizer used by two threads at once garbles ids."""
    scripts = expert_engine(tokenizer, list(by_id.values())).scripts
    chunks = [slots[i : i + chunk] for i in range(0, len(slots), chunk)]
    workers = max(1, min(workers, len(chunks)))
    toks: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(workers):
        toks.put(copy.deepcopy(tokenizer) if workers > 1 else tokenizer)

    def run(part: list[Slot]) -> list[tuple[Slot, Trajectory, list[Tool]]]:
        tok = toks.get()
        try:
            return _run_part(part, by_id, tok, ScriptedEngine(tok, scripts), env_factory, cfg)
        finally:
            toks.put(tok)

    done: dict[Slot, tuple[Trajectory, list[Tool]]] = {}
    with progress(len(slots), desc) as bar, ThreadPoolExecutor(workers) as pool:
        for fut in as_completed([pool.submit(run, c) for c in chunks]):
            for slot, tr, tools in fut.result():
                done[slot] = (tr, tools)
            ok = sum(reject_reason(tr) is None for tr, _ in done.values())
            bar.update(len(done), kept=ok)
    return done


def _schemas(env: Environment) -> list[Tool]:
    return [Tool(t.name, t.description, t.parameters) for t in env.tools]


def _renumber(msgs: list[Message], offset: int) -> list[Message]:
    """Shift `call_N` ids by `offset` so ids stay unique in a joined conversation."""

    def shift(cid: str | None) -> str | None:
        if cid and cid.startswith("call_") and cid[5:].isdigit():
            return f"call_{int(cid[5:]) + offset}"
        return cid

    out = []
    for m in msgs:
        calls = [replace(c, id=shift(c.id) or "") for c in m.tool_calls]
        out.append(replace(m, tool_calls=calls, tool_call_id=shift(m.tool_call_id)))
    return out


def _join(episodes: list[list[Message]]) -> list[Message]:
    """The first episode whole; later ones from their user message on, ids renumbered."""
    msgs = list(episodes[0])
    for ep in episodes[1:]:
        first_user = next(i for i, m in enumerate(ep) if m.role == "user")
        n_calls = sum(len(m.tool_calls) for m in msgs)
        msgs += _renumber(ep[first_user:], n_calls)
    return msgs


def expert_episodes(
    tasks: Sequence[Task],
    tokenizer: Any,
    env_factory: Callable[[Task], Environment],
    counts: Mapping[str, int] | None = None,
    cfg: AgentConfig | None = None,
    seed: int = 0,
    chunk: int = 8,
    workers: int = 2,
) -> tuple[list[EpisodeDemo], dict[str, dict[str, Any]]]:
    """Run the scripted experts on `tasks` and keep the verified episodes as conversations.

    Args:
        tasks: the task pool (any mix of kinds with a scripted expert; TRAIN tasks for SFT).
        tokenizer: the chat tokenizer the episodes are played (and tokenized) with.
        env_factory: task -> a fresh environment (arcforge.envs.registry.env_factory(world)).
        counts: conversations per kind (default: one per task of the kind).
        cfg: the agent config (max_turns, max_new_tokens, context_budget); a longer episode is
            rejected, so use the budgets the eval agent has.
        seed: picks and orders the tasks.
        chunk: episodes per run_episodes call (bounds the sandboxes open at once).
        workers: threads running chunks (sandboxed episodes mostly wait on subprocesses).

    Returns:
        (conversations, stats per kind: conversations requested/kept, episodes run/kept,
        rejected episodes by reason, seconds).
    """
    cfg = cfg or AgentConfig(max_turns=8, max_new_tokens=512, context_budget=8192)
    by_kind: dict[str, list[Task]] = {}
    for t in tasks:
        by_kind.setdefault(t.kind, []).append(t)
    demos, stats = [], {}
    for kind, pool in by_kind.items():
        t0 = time.time()
        n = len(pool) if counts is None else int(counts.get(kind, 0))
        plan = _plan(pool, kind, n, random.Random(f"{seed}:episodes:{kind}"))
        slots = list(dict.fromkeys(s for _, ss in plan for s in ss))
        by_id = {t.id: t for t in pool}
        done = _run_slots(
            slots, by_id, tokenizer, env_factory, cfg, chunk, workers, f"expert episodes ({kind})"
        )
        reasons = Counter(r for tr, _ in done.values() if (r := reject_reason(tr)) is not None)
        failed = [[tr.task_id, r] for tr, _ in done.values() if (r := reject_reason(tr))]
        kept, split = 0, 0
        for mode, ss in plan:
            if any(reject_reason(done[s][0]) is not None for s in ss):
                continue
            views = [episode_views(done[s][0], tokenizer) for s in ss]
            if len(ss) > 1 and any(len(v) > 1 for v in views):
                reasons["pair_compacted"] += 1  # a two-turn conversation needs whole episodes
                continue
            joined = [_join([v[0] for v in views])] if len(ss) > 1 else views[0]
            split += len(joined) - 1
            for msgs in joined:
                demos.append(
                    EpisodeDemo(
                        f"episode-{kind}-{kept:05d}",
                        kind,
                        mode,
                        [i for i, _ in ss],
                        msgs,
                        done[ss[0]][1],
                    )
                )
                kept += 1
        bad = sum(v for r, v in reasons.items() if r != "pair_compacted")
        stats[kind] = {
            "conversations_requested": n,
            "conversations": kept,
            "episodes": len(slots),
            "episodes_kept": len(slots) - bad,
            "split_by_compaction": split,
            "rejected": dict(sorted(reasons.items())),
            "rejected_examples": failed[:5],
            "seconds": round(time.time() - t0, 2),
        }
    return demos, stats


def world_tasks(world: Any, kind: str) -> list[Task]:
    """The world's TRAIN tasks for an expert kind (tir replays the reasoning problems)."""
    if kind not in KIND_SUITE:
        raise ValueError(f"no expert episodes for kind {kind!r}; known: {', '.join(KIND_SUITE)}")
    return world.tasks(kind, "train")


def world_episodes(
    world: Any,
    tokenizer: Any,
    cache_dir: Path,
    counts: Mapping[str, int],
    cfg: AgentConfig,
    kinds: Sequence[str] | None = None,
    seed: int = 0,
    workers: int = 2,
) -> tuple[list[EpisodeDemo], dict[str, dict[str, Any]]]:
    """Expert episodes on the world's train tasks, per kind cached as `cache_dir/<kind>.jsonl`
    plus `<kind>.json` (its counts and the settings that made it; written last). A kind whose
    cache matches the settings is read back, not re-run."""
    from arcforge.envs.registry import env_factory

    cache_dir.mkdir(parents=True, exist_ok=True)
    demos, stats = [], {}
    for kind in kinds or list(counts):
        key = {
            "format": EPISODE_FORMAT,
            "n": int(counts.get(kind, 0)),
            "seed": seed,
            "modes": list(KIND_MODES.get(kind, ())),
            "max_turns": cfg.max_turns,
            "max_new_tokens": cfg.max_new_tokens,
            "context_budget": cfg.context_budget,
        }
        if kind in EXPERT_VERSIONS:  # a changed expert script re-records its kind only
            key["expert"] = EXPERT_VERSIONS[kind]
        meta_path, data_path = cache_dir / f"{kind}.json", cache_dir / f"{kind}.jsonl"
        if meta_path.exists() and json.loads(meta_path.read_text()).get("key") == key:
            lines = data_path.read_text().splitlines()
            demos += [EpisodeDemo.from_dict(json.loads(ln)) for ln in lines if ln.strip()]
            stats[kind] = {**json.loads(meta_path.read_text())["stats"], "cached": True}
            continue
        made, st = expert_episodes(
            world_tasks(world, kind),
            tokenizer,
            env_factory(world),
            {kind: key["n"]},
            cfg,
            seed,
            workers=workers,
        )
        tmp = data_path.with_suffix(".jsonl.tmp")
        # keys in their own order: a tool call's arguments stay in the order the expert wrote
        # them (edit_file: path, old, new), which is the order SFT teaches the model to write
        tmp.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in made))
        tmp.replace(data_path)
        meta_path.write_text(json.dumps({"key": key, "stats": st.get(kind, {})}, indent=1))
        demos += made
        stats[kind] = st.get(kind, {})
    return demos, stats
