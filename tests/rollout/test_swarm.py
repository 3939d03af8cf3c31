"""Agent swarm: concurrent subagents, critical steps, orchestrator-only loss, the PARL reward's
annealing, and clear observations for bad orchestrator calls. Engines are scripted (the engine
is the edge); the environments, agent loop and subagent pool are real."""

from __future__ import annotations

import threading
import time

import pytest

from arcforge.envs.registry import env_factory, make_env, world_index
from arcforge.rewards.swarm import ParlReward, critical_steps, score_list, swarm_stats
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.rollout.policies import GarbageEngine, ScriptedEngine, expert_script
from arcforge.rollout.swarm import (
    SubagentPool,
    SwarmBudget,
    SwarmEnv,
    run_swarm_episodes,
    swarm_env_maker,
)
from arcforge.types import Message, Task, ToolCall, Validation
from arcforge.world.tasks.wide_search import subtasks, swarm_expert_script, swarm_tasks

CFG = AgentConfig(max_turns=5, max_new_tokens=2048, context_budget=16384)
SUB = AgentConfig(max_turns=4, max_new_tokens=512, context_budget=8192)


class SleepyEngine:
    """A scripted engine whose every generate call takes `delay` seconds; records each call's
    (start, end, number of prompts)."""

    def __init__(self, inner: ScriptedEngine, delay: float) -> None:
        self.inner, self.delay, self.calls = inner, delay, []
        self._lock = threading.Lock()

    @property
    def version(self) -> int:
        return 0

    def load_weights(self, state_dict, version: int) -> None:
        pass

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        t0 = time.monotonic()
        time.sleep(self.delay)
        out = self.inner.generate(prompts, params)
        with self._lock:
            self.calls.append((t0, time.monotonic(), len(prompts)))
        return out


def _call(tool: str, **args) -> ToolCall:
    return ToolCall(tool, args)


def _say(*calls: ToolCall, text: str = "") -> Message:
    return Message("assistant", text, reasoning="", tool_calls=list(calls))


def _wide(world, width: int) -> Task:
    return next(t for t in swarm_tasks(world, "train") if t.metadata["width"] == width)


def test_assignments_of_one_reply_run_concurrently(world, tok):
    task = _wide(world, 3)
    scripts = {t.instruction: expert_script(t) for t in subtasks(task)}  # 2 turns each
    sub = SleepyEngine(ScriptedEngine(tok, scripts), delay=0.2)
    orch = ScriptedEngine(tok, {task.instruction: swarm_expert_script(task)})
    world_index(world)  # the shared search index, built before the clock matters
    pool = SubagentPool(sub, tok, env_factory(world), SUB)
    try:
        (traj,) = run_swarm_episodes(orch, tok, pool, [task], CFG)
    finally:
        pool.close()
    eps = traj.reward_details["swarm"]["episodes"]
    assert [e["finish"] for e in eps] == ["answer"] * 3 and [e["steps"] for e in eps] == [2] * 3
    # every pair of subagent episodes overlaps in wall-clock time
    for a in eps:
        for b in eps:
            assert a["start"] < b["end"] and b["start"] < a["end"], eps
    # run one after another they would take at least 3 episodes x 2 calls x 0.2 s = 1.2 s
    span = max(e["end"] for e in eps) - min(e["start"] for e in eps)
    assert span < 1.2, span
    # 6 replies in fewer generate calls: the gateway merged concurrent episodes' turns
    assert sum(n for _, _, n in sub.calls) == 6 and len(sub.calls) < 6, sub.calls
    assert traj.reward_details["solved"] == 1.0
    assert [m.content for m in traj.messages if m.role == "tool"][1:] == [
        f"finder: {v}" for v in task.metadata["values"]
    ]


def _staged_episode(world, tok):
    """Orchestrator: create + 2 assignments (stage 1), 1 assignment (stage 2), answer.
    Subagents: A 2 steps (search, answer), B 3 steps (search, search, answer), C 1 step."""
    qa, qb, qc = "Question alpha?", "Question beta?", "Question gamma?"
    task = Task(
        "wide-0",
        "swarm",
        "List three things.",
        validation=Validation(answer="x; y; z"),
        metadata={"values": ["x", "y", "z"]},
    )
    s = lambda q: _call("search", query=q)  # noqa: E731
    sub = ScriptedEngine(
        tok,
        {
            qa: [_say(s("alpha")), _say(_call("answer", text="x"))],
            qb: [_say(s("beta")), _say(s("beta two")), _say(_call("answer", text="y"))],
            qc: [Message("assistant", "Answer: z", reasoning="")],
        },
    )
    tools = ["search", "open", "answer"]
    orch = ScriptedEngine(
        tok,
        {
            task.instruction: [
                _say(
                    _call("create_subagent", name="w", instructions="Be brief.", tools=tools),
                    _call("assign_task", agent="w", task=qa),
                    _call("assign_task", agent="w", task=qb),
                ),
                _say(_call("assign_task", agent="w", task=qc)),
                _say(_call("answer", text="x; y; z")),
            ]
        },
    )
    pool = SubagentPool(sub, tok, env_factory(world), SUB)
    try:
        (traj,) = run_swarm_episodes(
            orch, tok, pool, [task], CFG, SwarmBudget(), ParlReward(0.2, 0.1, 10), clock=lambda: 5
        )
    finally:
        pool.close()
    return traj


def test_critical_steps_of_a_fixed_episode(world, tok):
    traj = _staged_episode(world, tok)
    sw = traj.reward_details["swarm"]
    assert traj.finish_reason == "answer" and traj.reward_details["agent"]["turns"] == 3
    assert [e["steps"] for e in sw["episodes"]] == [2, 3, 1]
    assert sw["stage_steps"] == [3, 1]  # the longest subagent of each stage
    # critical = 3 orchestrator steps + max(2, 3) + 1 = 7; total steps = 3 + 2 + 3 + 1 = 9
    assert sw["critical_steps"] == 7 and sw["subagent_steps"] == 6
    assert critical_steps(3, [[2, 3], [1]]) == 7 and critical_steps(4, []) == 4
    # reward at step 5 of 10: lambdas halved; r_parallel = mean width 1.5 / 8 = 0.1875,
    # r_finish = 3/3 -> r = 1 + 0.1 * 0.1875 + 0.05 * 1 = 1.06875
    assert sw["lambda1"] == pytest.approx(0.1) and sw["lambda2"] == pytest.approx(0.05)
    assert sw["r_parallel"] == pytest.approx(0.1875) and sw["r_finish"] == 1.0
    assert traj.reward == pytest.approx(1.06875)
    stats = swarm_stats([traj.reward_details])
    assert stats["swarm_critical_steps"] == 7 and stats["swarm_r_task"] == 1.0


def test_only_orchestrator_tokens_carry_loss(world, tok):
    traj = _staged_episode(world, tok)
    model = [s for s in traj.segments if s.source == "model"]
    assert len(model) == 3  # one segment per orchestrator reply
    for s in traj.segments:
        assert s.loss_mask == [int(s.source == "model")] * len(s.token_ids)
    assert sum(traj.loss_mask) == sum(len(s.token_ids) for s in model)
    # what a subagent wrote ("y", after its two searches) reaches the orchestrator as env text
    env_text = tok.decode([t for s in traj.segments if s.source == "env" for t in s.token_ids])
    assert "w: y" in env_text
    sub_msgs = traj.reward_details["swarm"]["episodes"][1]["messages"]
    assert any(m["role"] == "tool" and m.get("name") == "search" for m in sub_msgs)
    orch_tool_names = {m.name for m in traj.messages if m.role == "tool"}
    assert "search" not in orch_tool_names  # subagent tool calls are not the orchestrator's


def test_parl_lambdas_anneal_linearly_to_zero():
    r = ParlReward(lambda1=0.2, lambda2=0.1, anneal_steps=10)
    assert r.weights(0) == (0.2, 0.1)
    assert r.weights(5) == pytest.approx((0.1, 0.05))
    assert r.weights(10) == (0.0, 0.0) and r.weights(25) == (0.0, 0.0)
    # 0.5 + 0.1 * 1.0 + 0.05 * 0.5 = 0.625
    assert r(0.5, 1.0, 0.5, step=5)["reward"] == pytest.approx(0.625)
    assert r(0.5, 1.0, 0.5, step=10)["reward"] == 0.5
    with pytest.raises(ValueError, match="anneal_steps"):
        ParlReward(anneal_steps=0)


def test_score_list_is_positional_and_normalized():
    assert score_list("Answer: Paris; the Rome ; oslo", ["paris", "Rome", "Oslo"]) == (1.0, True)
    assert score_list("Rome; Paris; Oslo", ["Paris", "Rome", "Oslo"]) == (1 / 3, False)
    assert score_list("Paris, Rome", ["Paris", "Rome", "Oslo"]) == (2 / 3, False)
    assert score_list(None, ["a"]) == (0.0, False)


def _env(world, tok, budget: SwarmBudget) -> tuple[SwarmEnv, SubagentPool]:
    sub = ScriptedEngine(tok, {}, fallback=Message("assistant", "Answer: q", reasoning=""))
    pool = SubagentPool(sub, tok, env_factory(world), SUB)
    env = SwarmEnv(pool, budget)
    env.reset(_wide(world, 3))
    return env, pool


def _obs(env: SwarmEnv, *calls: ToolCall) -> list[str]:
    return [m.content for m in env.step(_say(*calls)).observations]


def test_bad_orchestrator_calls_get_clear_observations(world, tok):
    env, pool = _env(world, tok, SwarmBudget(max_subagents=1, max_parallel=2, max_assignments=3))
    ok = ["search", "answer"]
    try:
        cases = [
            (_call("spawn", name="a"), "unknown tool"),
            (_call("create_subagent", name="a", instructions="x"), "tools"),  # missing arg
            (_call("create_subagent", name="a", instructions="x", tools=["fly"]), "'fly'"),
            (
                _call("create_subagent", name="a", instructions="", tools=["search", "lookup"]),
                "one kind",
            ),
            (_call("create_subagent", name="a", instructions="", tools=[]), "no tools"),
            (_call("assign_task", agent="nobody", task="q?"), "create_subagent first"),
            (_call("assign_task", agent="a"), "task"),  # missing arg
        ]
        for call, needle in cases:
            (text,) = _obs(env, call)
            assert text.startswith("error:") and needle in text, (call, text)
        assert _obs(env, _call("create_subagent", name="a", instructions="", tools=ok))[0] == (
            "created subagent 'a' with tools search, answer"
        )
        (dup,) = _obs(env, _call("create_subagent", name="a", instructions="", tools=ok))
        assert dup.startswith("error:") and "exists" in dup
        (over,) = _obs(env, _call("create_subagent", name="b", instructions="", tools=ok))
        assert over.startswith("error: over budget") and "1 subagents" in over
        (empty,) = _obs(env, _call("assign_task", agent="a", task="  "))
        assert empty == "error: assign_task needs a non-empty task"
        three = _obs(env, *[_call("assign_task", agent="a", task=f"q{i}?") for i in range(3)])
        assert three[:2] == ["a: q", "a: q"]
        assert three[2] == "error: over budget: at most 2 assignments per reply"
        (one, two) = _obs(env, *[_call("assign_task", agent="a", task=f"r{i}?") for i in range(2)])
        assert one == "a: q" and two == "error: over budget: at most 3 assignments per episode"
        assert not env._s.answer and env.verify().details["swarm"]["assignments"] == 3
    finally:
        pool.close()


def test_a_garbage_orchestrator_never_crashes_the_loop(world, tok):
    tasks = swarm_tasks(world, "train")[:12]
    sub = ScriptedEngine(tok, {}, fallback=Message("assistant", "Answer: q", reasoning=""))
    pool = SubagentPool(sub, tok, env_factory(world), SUB)
    cfg = AgentConfig(max_turns=3, max_new_tokens=64, context_budget=4096, seed=0)
    try:
        trajs = run_swarm_episodes(GarbageEngine(tok, seed=3), tok, pool, tasks, cfg)
    finally:
        pool.close()
    assert len(trajs) == 12
    assert all(t.finish_reason in {"answer", "max_turns", "context", "length"} for t in trajs)
    assert all("error" not in t.reward_details for t in trajs)


def test_registry_makes_swarm_envs_only_with_a_bound_maker(world, tok):
    task = _wide(world, 3)
    with pytest.raises(ValueError, match="needs make="):
        make_env(task, world)
    pool = SubagentPool(ScriptedEngine(tok, {}), tok, env_factory(world), SUB)
    try:
        env = make_env(task, world, make=swarm_env_maker(pool))
        assert isinstance(env, SwarmEnv)
        assert [t.name for t in env.tools] == ["create_subagent", "assign_task", "answer"]
    finally:
        pool.close()
