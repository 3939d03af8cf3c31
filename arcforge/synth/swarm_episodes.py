"""SFT episodes of the agent-swarm orchestrator, recorded from its scripted expert.

The scripted orchestrator (`arcforge.world.tasks.wide_search.swarm_expert_script`: one search subagent,
every item of a wide task assigned in one reply, then the list) runs in the real SwarmEnv over
subagents that act in the real search environment. The subagents are the scripted search
expert (`expert_engine` on each item's one-hop task) unless a frozen checkpoint's engine is
given. An episode is kept only when the orchestrator finished with an answer, nothing failed
to parse, no compaction happened, every subagent finished, the list is right, and every value
of the list appeared in the subagents' results the orchestrator saw (the script knows the
answer; the observations must show it). Kept episodes become `EpisodeDemo` conversations of
kind "swarm" with the orchestrator's tool schemas; subagent messages are observations there,
masked by the chat template like any tool output.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from arcforge.envs.registry import env_factory
from arcforge.rollout.agent import AgentConfig
from arcforge.rollout.engines.base import Engine
from arcforge.rollout.policies import ScriptedEngine, expert_engine
from arcforge.rollout.swarm import SubagentPool, SwarmBudget, SwarmEnv, run_swarm_episodes
from arcforge.synth.episodes import EpisodeDemo, reject_reason
from arcforge.types import Tool, Trajectory
from arcforge.world.tasks.wide_search import subtasks, swarm_expert_script, swarm_tasks


def swarm_reject_reason(traj: Trajectory) -> str | None:
    """Why an orchestrator episode is not SFT data (None: it is)."""
    if traj.reward_details.get("agent", {}).get("compactions", 0):
        return "compacted"
    swarm = traj.reward_details.get("swarm") or {}
    if not swarm.get("episodes") or any(e["finish"] != "answer" for e in swarm["episodes"]):
        return "subagent_unfinished"
    if traj.reward_details.get("solved", 0.0) < 1.0:
        return "wrong_list"
    base = reject_reason(traj)  # finish, parse errors, reward (with shaping, >= r_task)
    if base is not None and base != "ungrounded":
        return base
    seen = " ".join(m.content for m in traj.messages if m.role == "tool").lower()
    answer = str(traj.reward_details.get("answer") or "")
    items = [v.strip().lower() for v in answer.split(";") if v.strip()]
    return None if all(v in seen for v in items) else "ungrounded"


def swarm_episodes(
    world: Any,
    tokenizer: Any,
    n: int = 100,
    cfg: AgentConfig | None = None,
    sub_cfg: AgentConfig | None = None,
    subagents: Engine | None = None,
) -> tuple[list[EpisodeDemo], dict[str, Any]]:
    """Expert orchestrator episodes on the world's first `n` TRAIN wide tasks.

    Args:
        world: the embedded world.
        tokenizer: the chat tokenizer.
        n: wide tasks to run.
        cfg: the orchestrator's agent config; sub_cfg: the subagents'.
        subagents: the subagents' engine (None: the scripted search expert).

    Returns:
        (conversations, stats: episodes run and kept, rejected by reason).
    """
    cfg = cfg or AgentConfig(max_turns=4, max_new_tokens=1024, context_budget=8192)
    sub_cfg = sub_cfg or AgentConfig(max_turns=4, max_new_tokens=256, context_budget=4096)
    tasks = swarm_tasks(world, "train")[:n]
    orch = ScriptedEngine(tokenizer, {t.instruction: swarm_expert_script(t) for t in tasks})
    sub = subagents or expert_engine(tokenizer, [s for t in tasks for s in subtasks(t)])
    pool = SubagentPool(sub, tokenizer, env_factory(world), sub_cfg)
    try:
        trajs = run_swarm_episodes(orch, tokenizer, pool, tasks, cfg, SwarmBudget())
    finally:
        pool.close()
    schemas = [Tool(t.name, t.description, t.parameters) for t in SwarmEnv(pool).tools]
    reasons: Counter[str] = Counter()
    demos: list[EpisodeDemo] = []
    for task, tr in zip(tasks, trajs):
        why = swarm_reject_reason(tr)
        if why is not None:
            reasons[why] += 1
            continue
        demos.append(
            EpisodeDemo(
                f"episode-swarm-{len(demos):05d}",
                "swarm",
                "interleaved",
                [task.id],
                list(tr.messages),
                schemas,
            )
        )
    stats = {
        "episodes": len(trajs),
        "episodes_kept": len(demos),
        "rejected": dict(sorted(reasons.items())),
    }
    return demos, stats
