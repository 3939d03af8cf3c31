"""The `swarm` suite: wide search tasks, an agent swarm against a single agent on the same items.

Held-out items are the test split of `arcforge.world.tasks.wide_search.swarm_tasks` (entities
no train item uses). Each item runs twice on the evaluated checkpoint, greedily:
- swarm: the checkpoint is the orchestrator in SwarmEnv and also the frozen subagents
  (SubagentPool over the same weights), so the two arms differ only in the scaffold;
- single: the checkpoint alone in the search environment with the same instruction.
Both are scored by `score_list` (solved: every item of the list right; item_acc: the share
right) and timed in critical steps (`episode_critical_steps`: a single agent's turns; the
orchestrator's turns plus each stage's longest subagent). The suite's scores are the swarm's
solved flags; `examples[0]["comparison"]` holds both arms' accuracy, item accuracy and mean
critical and total steps, and `swarm_single` scores the single agent alone.

Budgets: the orchestrator's first reply creates a subagent and assigns every item, so it gets
4x the eval's reply length; a single agent needs one turn per item plus its answer, so it gets
max(eval turns, widest item + 2). The swarm reward's shaping terms are off (lambda 0): the
score is task success.
"""

from __future__ import annotations

from typing import Any

from arcforge.envs.registry import env_factory
from arcforge.eval.evaluator import SuiteOutput
from arcforge.eval.failures import episode_record, tally
from arcforge.rewards.swarm import ParlReward, episode_critical_steps, score_list
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.swarm import SubagentPool, SwarmBudget, run_swarm_episodes
from arcforge.types import Task, Trajectory
from arcforge.world.tasks.wide_search import WIDTHS, single_agent_task, swarm_tasks


def _arm(tasks: list[Task], trajs: list[Trajectory]) -> dict[str, Any]:
    """Solved flags, item accuracy, mean critical and total (all agents') steps of one arm."""
    scored = [
        score_list(tr.reward_details.get("answer"), t.metadata["values"])
        for t, tr in zip(tasks, trajs)
    ]
    crit = [episode_critical_steps(tr.reward_details) for tr in trajs]
    total = [
        int(tr.reward_details.get("agent", {}).get("turns", 0))
        + int(tr.reward_details.get("swarm", {}).get("subagent_steps", 0))
        for tr in trajs
    ]
    n = max(1, len(trajs))
    return {
        "solved": [float(s) for _, s in scored],
        "accuracy": sum(s for _, s in scored) / n,
        "item_acc": sum(a for a, _ in scored) / n,
        "critical_steps": sum(crit) / n,
        "total_steps": sum(total) / n,
    }


def run_arms(
    ev: Any,
    tasks: list[Task],
    max_turns: int,
    max_new_tokens: int,
    arms: tuple[str, ...] = ("swarm", "single"),
) -> dict[str, Any]:
    """Run the requested arms on `tasks` with the evaluator's checkpoint.

    Returns:
        {arm: {"trajectories", "solved", "accuracy", "item_acc", "critical_steps",
        "total_steps"}}.
    """
    budget = int(getattr(ev.model.config, "max_position_embeddings", 2048))
    out: dict[str, Any] = {}
    if "swarm" in arms:
        sub = AgentConfig(
            max_turns=max_turns,
            max_new_tokens=max_new_tokens,
            context_budget=budget,
            temperature=0.0,
        )
        orch = AgentConfig(
            max_turns=max_turns,
            max_new_tokens=min(4 * max_new_tokens, budget // 2),
            context_budget=budget,
            temperature=0.0,
        )
        pool = SubagentPool(ev.engine, ev.tokenizer, env_factory(ev.world), sub)
        try:
            trajs = run_swarm_episodes(
                ev.engine, ev.tokenizer, pool, tasks, orch, SwarmBudget(), ParlReward(0.0, 0.0, 1)
            )
        finally:
            pool.close()
        out["swarm"] = {"trajectories": trajs, **_arm(tasks, trajs)}
    if "single" in arms:
        widest = max((int(t.metadata["width"]) for t in tasks), default=max(WIDTHS))
        acfg = AgentConfig(
            max_turns=max(max_turns, widest + 2),
            max_new_tokens=max_new_tokens,
            context_budget=budget,
            temperature=0.0,
        )
        single = [single_agent_task(t) for t in tasks]
        trajs = run_episodes(ev.engine, ev.tokenizer, env_factory(ev.world), single, acfg)
        out["single"] = {"trajectories": trajs, **_arm(tasks, trajs)}
    return out


def _output(tasks: list[Task], arms: dict[str, Any], main: str) -> SuiteOutput:
    trajs = arms[main]["trajectories"]
    for tr, s in zip(trajs, arms[main]["solved"]):
        tr.reward = s  # outcome() reads solved from reward
    records = [episode_record(t, tr) for t, tr in zip(tasks, trajs)]
    comparison = {
        arm: {k: round(v, 4) for k, v in r.items() if k not in ("trajectories", "solved")}
        for arm, r in arms.items()
    }
    ex = [{"comparison": comparison, "n": len(tasks)}]
    ex += [
        {
            "task": t.instruction[:300],
            "reward": tr.reward,
            "finish": tr.finish_reason,
            "critical_steps": episode_critical_steps(tr.reward_details),
            "last": tr.messages[-1].content[:300] if tr.messages else "",
        }
        for t, tr in list(zip(tasks, trajs))[:3]
    ]
    return SuiteOutput(
        arms[main]["solved"], ex, outcomes=tally(e["outcome"] for e in records), episodes=records
    )


def suite_swarm(ev: Any, cfg: Any):
    """The swarm's solved flags; both arms' figures in examples[0]["comparison"]."""
    tasks = swarm_tasks(ev.world, "test")[: cfg.n_for("swarm")]
    return _output(tasks, run_arms(ev, tasks, cfg.max_turns, cfg.max_new_tokens), "swarm")


def suite_swarm_single(ev: Any, cfg: Any):
    """The single-agent baseline alone on the swarm suite's items."""
    tasks = swarm_tasks(ev.world, "test")[: cfg.n_for("swarm_single")]
    arms = run_arms(ev, tasks, cfg.max_turns, cfg.max_new_tokens, ("single",))
    return _output(tasks, arms, "single")


SWARM_SUITES = {"swarm": suite_swarm, "swarm_single": suite_swarm_single}
