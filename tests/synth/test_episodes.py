"""Expert episodes: scripted experts act in the real environments (bwrap sandboxes, the world's
tools); only verified episodes become SFT conversations, observations are masked, only train
tasks are used, the per-run cache is reused, and `world:episodes` reaches the SFT stage."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from arcforge.chat.encoding import encode_spans
from arcforge.chat.template import ThinkingConfig, render
from arcforge.envs.registry import env_factory, make_env
from arcforge.errors import ConfigError
from arcforge.pipeline import RunContext
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.policies import expert_engine, expert_script, terminal_check
from arcforge.run_config import RunCfg
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.stages.sft import SFTStageCfg, _conversations
from arcforge.stages.world_source import world_records
from arcforge.synth.episodes import (
    KIND_SUITE,
    episode_views,
    expert_episodes,
    reject_reason,
    world_episodes,
    world_tasks,
)
from arcforge.train.sft import Conversation, encode_conversations
from arcforge.world.world_config import EpisodeCounts

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
# tool: one conversation per mode; code/terminal: interleaved + turn_level
COUNTS = {"tool": 4, "search": 2, "tir": 4, "code": 2, "terminal": 2, "swe": 1}
CFG = AgentConfig(max_turns=8, max_new_tokens=384, context_budget=4096)


@pytest.fixture(scope="module")
def made(world, tok):
    tasks = [t for kind in COUNTS for t in world_tasks(world, kind)]
    return expert_episodes(tasks, tok, env_factory(world), COUNTS, CFG, seed=3)


def test_every_kinds_expert_succeeds_in_its_real_environment(made):
    demos, stats = made
    for kind, n in COUNTS.items():
        st = stats[kind]
        assert st["rejected"] == {} and st["episodes_kept"] == st["episodes"], (kind, st)
        assert st["conversations"] == n, (kind, st)
    assert {d.mode for d in demos if d.kind == "tool"} == {
        "interleaved",
        "preserved",
        "dropped",
        "turn_level",
    }
    assert {d.mode for d in demos if d.kind == "code"} == {"interleaved", "turn_level"}
    # turn_level: the last user turn has thinking off and its replies carry no reasoning
    for d in (d for d in demos if d.mode == "turn_level"):
        users = [i for i, m in enumerate(d.messages) if m.role == "user"]
        assert d.messages[users[-1]].thinking is False
        assert all(not m.reasoning for m in d.messages[users[-1] :] if m.role == "assistant")
        assert any(m.reasoning for m in d.messages[: users[-1]] if m.role == "assistant") == (
            len(users) == 2
        )
    pairs = [d for d in demos if d.mode in ("preserved", "dropped")]
    assert pairs and all(len(d.task_ids) == 2 for d in pairs)
    for d in pairs:  # call ids stay unique across the joined episodes
        ids = [c.id for m in d.messages for c in m.tool_calls]
        assert len(ids) == len(set(ids)) and len(ids) > 0


def test_observations_are_what_the_environment_returned(world, made):
    demos, _ = made
    by_id = {t.id: t for kind in COUNTS for t in world_tasks(world, kind)}
    swe = next(d for d in demos if d.kind == "swe")
    found = next(m for m in swe.messages if m.role == "tool" and m.name == "localize")
    bug = by_id[swe.task_ids[0]].context["bug"]
    wrong = bug["mutated"].splitlines()[bug["line"] - 1]
    top = found.content.splitlines()[1].split()
    assert (
        top[1:] == [bug["path"], bug["function"]] and f"{bug['line']:4d} {wrong}" in found.content
    )
    tests = next(m for m in swe.messages if m.role == "tool" and m.name == "run_tests")
    assert " passed" in tests.content and "failed" not in tests.content
    tir = next(d for d in demos if d.kind == "tir" and d.mode == "interleaved")
    out = next(m for m in tir.messages if m.role == "tool")
    assert out.content.strip() == by_id[tir.task_ids[0]].validation.answer
    term = next(d for d in demos if d.kind == "terminal")
    task = by_id[term.task_ids[0]]
    calls = [c for m in term.messages for c in m.tool_calls or []]
    assert [c.arguments["command"] for c in calls] == [
        task.metadata["solution"].strip(),
        terminal_check(task),
    ]
    check = [m for m in term.messages if m.role == "tool"][-1]  # the result, shown after acting
    assert check.content.strip() and "[exit" not in check.content and "error" not in check.content


@pytest.mark.parametrize("kind", ["code", "terminal"])
def test_replaying_a_kept_conversation_in_a_fresh_env_verifies(world, made, kind):
    """Re-verify: the recorded assistant messages, stepped through a new environment, give
    the recorded observations and reward 1."""
    demos, _ = made
    d = next(d for d in demos if d.kind == kind and d.mode == "interleaved")
    task = next(t for t in world_tasks(world, kind) if t.id == d.task_ids[0])
    env = make_env(task, world)
    try:
        env.reset(task)
        recorded = [m for m in d.messages if m.role == "tool"]
        seen = []
        for m in (m for m in d.messages if m.role == "assistant"):
            seen += env.step(m).observations
        assert [o.content for o in seen] == [o.content for o in recorded]
        assert env.verify().score == 1.0
    finally:
        env.close()


def test_tool_outputs_are_masked_in_the_encoded_sft_example(made, tok):
    demos, _ = made
    for d in (d for d in demos if d.kind in ("swe", "terminal", "tir", "tool")):
        (ex,), _ = encode_conversations([Conversation(d.messages, d.tools, True)], tok, 100_000)
        # locate every span of the rendering inside the encoded example
        spans = render(d.messages, d.tools, ThinkingConfig(preserve=True))
        pieces = encode_spans(spans, tok)
        assert [t for p in pieces for t in p] == ex.input_ids
        at, mask_of = 0, []
        for span, ids in zip(spans, pieces):
            mask_of.append((span, ex.loss_mask[at : at + len(ids)]))
            at += len(ids)
        obs = [(s, m) for s, m in mask_of if s.kind == "observation"]
        tool_texts = [m.content for m in d.messages if m.role == "tool"]
        assert len(tool_texts) >= 1 and all(any(t in s.text for s, _ in obs) for t in tool_texts)
        assert all(m and not any(m) for _, m in obs)  # every observation token masked
        assert all(all(m) for s, m in mask_of if s.kind in ("content", "tool_call") and m)
        assert sum(ex.loss_mask) > 0
        assert {t.name for t in d.tools} <= {t["function"]["name"] for t in _schemas(spans)}


def _schemas(spans) -> list[dict]:
    """The tool schemas rendered in the system block (one JSON object per line)."""
    return [json.loads(ln) for s in spans if s.kind == "tools" for ln in s.text.splitlines()]


def test_only_train_tasks_are_used(world, made):
    demos, _ = made
    test_ids = {t.id for k in KIND_SUITE for t in world.tasks(KIND_SUITE[k], "test")}
    test_text = {t.instruction for k in KIND_SUITE for t in world.tasks(KIND_SUITE[k], "test")}
    train_ids = {t.id for k in KIND_SUITE for t in world.tasks(KIND_SUITE[k], "train")}
    for d in demos:
        assert set(d.task_ids) <= train_ids and not set(d.task_ids) & test_ids
        users = [m.content for m in d.messages if m.role == "user"]
        assert not any(u.split("\n\n")[0] in test_text for u in users)


def test_a_failing_expert_is_rejected_and_counted(world, tok):
    task = world_tasks(world, "terminal")[0]
    broken = replace(task, metadata={**task.metadata, "solution": "echo wrong > nothing.txt"})
    demos, stats = expert_episodes([broken], tok, env_factory(world), {"terminal": 1}, CFG)
    assert demos == [] and stats["terminal"]["rejected"] == {"reward<1": 1}
    short = replace(CFG, max_new_tokens=8, context_budget=4096)  # replies cut: "length"
    demos, stats = expert_episodes([task], tok, env_factory(world), {"terminal": 1}, short)
    assert demos == [] and stats["terminal"]["rejected"] == {"length": 1}


def test_world_episodes_cache_is_reused(world, tok, tmp_path):
    counts = {"tool": 3, "tir": 2}
    first, st1 = world_episodes(world, tok, tmp_path, counts, CFG, ["tool"])
    path = tmp_path / "tool.jsonl"
    stamp = path.stat().st_mtime_ns
    again, st2 = world_episodes(world, tok, tmp_path, counts, CFG, ["tool"])
    assert st2["tool"]["cached"] is True and "cached" not in st1["tool"]
    assert path.stat().st_mtime_ns == stamp  # not rewritten: nothing was re-run
    assert [d.to_dict() for d in again] == [d.to_dict() for d in first] and len(first) == 3
    _, st3 = world_episodes(world, tok, tmp_path, {"tool": 2}, CFG, ["tool"])
    assert "cached" not in st3["tool"] and st3["tool"]["conversations"] == 2  # new settings


def test_world_episodes_source_feeds_the_sft_stage(world, tok, tmp_path):
    # counts come from the world options (world.options.episodes), times world.scale (0.1)
    world = replace(world, config=replace(world.config, episodes=EpisodeCounts(terminal=20)))
    cfg = RunCfg(
        name="t",
        run_dir=str(tmp_path),
        world={"seed": 7, "scale": 0.1},
        eval={"max_turns": 8, "max_new_tokens": 256},
    )  # the episodes' agent budgets
    ctx = RunContext(cfg, tmp_path, _world=world, _tokenizer=tok)
    recs = world_records(world, "episodes/terminal", None, ctx)
    assert len(recs) == 2
    assert (tmp_path / "world" / "episodes" / "terminal.jsonl").exists()
    with pytest.raises(ConfigError, match="train tasks only"):
        world_records(world, "episodes/terminal", "test", ctx)
    with pytest.raises(ConfigError, match="unknown kind 'slides'"):
        world_records(world, "episodes/slides", None, ctx)
    stage = SFTStageCfg(name="sft", kind="sft", sources=[{"source": "world:episodes/terminal"}])
    convs = _conversations(ctx, stage)  # reads world:episodes/terminal from the run's world
    assert len(convs) == len(recs)
    assert all([t.name for t in c.tools] == ["bash", "view_file", "edit_file"] for c in convs)


def test_a_once_compacted_episode_becomes_the_two_views_its_replies_saw(world, tok):
    """Shrink the context budget until the agent folds observations once mid-episode: the
    episode becomes (history before the fold, all trained) + (folded context, only the later
    replies trained), so every reply is trained exactly once."""
    task = next(t for t in world_tasks(world, "search") if len(t.metadata["path"]) == 3)
    keep1 = replace(CFG, keep_recent_observations=1)  # search results are short: fold 3 of 4
    full = run_episodes(expert_engine(tok, [task]), tok, env_factory(world), [task], keep1)[0]
    assert full.reward == 1.0 and full.reward_details["agent"]["compactions"] == 0
    turns = full.reward_details["agent"]["turns"]
    for budget in range(len(full.token_ids) - 20, 600, -20):
        cfg = replace(keep1, max_new_tokens=120, context_budget=budget)
        traj = run_episodes(expert_engine(tok, [task]), tok, env_factory(world), [task], cfg)[0]
        if traj.reward_details["agent"]["compactions"] == 1 and reject_reason(traj) is None:
            first, second = episode_views(traj, tok)
            if any("[folded" in m.content for m in second if m.role == "tool"):
                break  # the fold, not only clipped notes
    else:
        pytest.fail("no budget gave a single compaction that folds an observation")
    assert first == traj.messages[: len(first)] and first[-1].role == "assistant"
    assert any("[folded" in m.content for m in second if m.role == "tool")
    trained = [m for v in (first, second) for m in v if m.role == "assistant" and m.train]
    assert len(trained) == turns  # each reply trained once
    calls = [[(c.name, c.arguments) for c in m.tool_calls] for m in trained]
    assert calls == [
        [(c.name, c.arguments) for c in m.tool_calls]
        for m in traj.messages
        if m.role == "assistant"
    ]


def test_a_cached_episode_trains_on_the_prompt_the_agent_loop_renders(world, tok, tmp_path):
    """The cache's JSON round trip once sorted the tool schemas' keys, so SFT saw another
    system prompt than the agent loop; the template now renders schemas in one order."""
    from arcforge.chat.encoding import render_ids

    counts = {"terminal": 2, "swe": 1, "tool": 1}
    world_episodes(world, tok, tmp_path, counts, CFG)
    demos, stats = world_episodes(world, tok, tmp_path, counts, CFG)  # read back from the cache
    assert all(s["cached"] for s in stats.values())
    by_id = {t.id: t for kind in counts for t in world_tasks(world, kind)}
    checked = 0
    for d in demos:
        if d.mode != "interleaved":
            continue
        (ex, *_), _ = encode_conversations([Conversation(d.messages, d.tools)], tok, 4096)
        task = by_id[d.task_ids[0]]
        env = make_env(task, world)
        try:
            msgs = env.reset(task)
            live = render_ids(
                msgs, tok, tools=env.tools, thinking=ThinkingConfig(), add_generation_prompt=True
            ).input_ids
        finally:
            getattr(env, "close", lambda: None)()
        assert ex.input_ids[: ex.loss_mask.index(1)] == list(live), d.kind
        checked += 1
    assert checked >= 3
    # the expert's calls, argument order included, survive the cache
    for d in demos:
        script = expert_script(by_id[d.task_ids[0]])
        want = [(c.name, list(c.arguments.items())) for m in script for c in m.tool_calls or []]
        got = [(c.name, list(c.arguments.items())) for m in d.messages for c in m.tool_calls or []]
        assert got == want, d.kind


def test_the_unseen_split_leaves_out_every_task_an_sft_demo_or_episode_shows(world, tok, tmp_path):
    none = {k: 0 for k in KIND_SUITE}
    world = replace(
        world, config=replace(world.config, episodes=EpisodeCounts(**{**none, "tool": 40}))
    )
    cfg = RunCfg(
        name="t",
        run_dir=str(tmp_path),
        world={"seed": 7, "scale": 0.1},
        eval={"max_turns": 8, "max_new_tokens": 256},
    )
    ctx = RunContext(cfg, tmp_path, _world=world, _tokenizer=tok)
    unseen = world_records(world, "tool", "unseen", ctx)
    episodes = [json.loads(ln) for ln in (tmp_path / "world" / "episodes" / "tool.jsonl").open()]
    assert len(episodes) == 4
    shown = {i for d in world.sft_demos() for i in d.shown()}
    assert any(len(d.shown()) == 2 for d in world.sft_demos())  # a two-task demo counts both
    shown |= {i for e in episodes for i in e["task_ids"]}
    train = {t.id for t in world.tasks("tool", "train")}
    ids = [r.task.id for r in unseen]
    assert ids and set(ids) == train - shown  # every other train task, none shown, no test task
    # the same split of a suite no episode or demo touches is its whole train pool
    assert len(world_records(world, "search", "unseen", ctx)) == len(world.tasks("search", "train"))
    with pytest.raises(ConfigError, match="needs a run"):
        world_records(world, "tool", "unseen", None)


def test_a_search_episode_whose_results_never_showed_the_answer_is_rejected(world, tok):
    """The scripted expert knows the answer from the task; an episode is SFT data only when a
    search result showed it (else the model would learn to answer what it never saw)."""
    task = next(t for t in world_tasks(world, "search") if len(t.metadata["path"]) == 2)
    traj = run_episodes(expert_engine(tok, [task]), tok, env_factory(world), [task], CFG)[0]
    assert reject_reason(traj) is None
    answer = str(task.validation.answer)
    blind = [
        replace(m, content=m.content.replace(answer, "someone")) if m.role == "tool" else m
        for m in traj.messages
    ]
    assert reject_reason(replace(traj, messages=blind)) == "ungrounded"
