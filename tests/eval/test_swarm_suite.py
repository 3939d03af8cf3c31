"""The swarm suite's two arms on the same held-out items: with scripted experts both solve
every item, and critical steps follow by hand from the scripts."""

from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.eval.swarm_suite import run_arms
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.policies import ScriptedEngine, expert_script
from arcforge.world.tasks.wide_search import (
    single_expert_script,
    subtasks,
    swarm_expert_script,
    swarm_tasks,
)


def test_swarm_and_single_agent_critical_steps_on_the_same_items(world, tok):
    model = init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=8192), 0)
    tasks = swarm_tasks(world, "test")[:2]
    scripts = {s.instruction: expert_script(s) for t in tasks for s in subtasks(t)}
    swarm_ev = Evaluator(
        model,
        tok,
        ScriptedEngine(tok, {**scripts, **{t.instruction: swarm_expert_script(t) for t in tasks}}),
        world,
    )
    single_ev = Evaluator(
        model,
        tok,
        ScriptedEngine(tok, {t.instruction: single_expert_script(t) for t in tasks}),
        world,
    )
    swarm = run_arms(swarm_ev, tasks, 6, 600, ("swarm",))["swarm"]
    single = run_arms(single_ev, tasks, 6, 600, ("single",))["single"]
    assert swarm["solved"] == [1.0, 1.0] and single["solved"] == [1.0, 1.0]
    # swarm: 2 orchestrator steps + one stage of 2-step subagents = 4 per item;
    # single: one search per entity + the answer = width + 1
    widths = [t.metadata["width"] for t in tasks]
    assert swarm["critical_steps"] == 4.0
    assert single["critical_steps"] == sum(w + 1 for w in widths) / 2
    assert swarm["total_steps"] == sum(2 + 2 * w for w in widths) / 2
    assert {"swarm", "swarm_single"} <= set(SUITES)
