"""CC-Bench-style engineering suites: backend Pass@1, chained steps, repository exploration.

- backend   the world's held-out code tasks and repo (SWE) tasks, one greedy attempt each in
            their sandboxed environments (CodeEnv, SWEEnv); Pass@1 = every hidden test passed
- chained   multi-step module building (`arcforge.world.tasks.chains`, ChainEnv): after each step
            that step's tests and all earlier steps' tests run; 1 only if no step ever failed
- explore   find the file implementing a described behaviour in a world repo with list/read
            tools (`arcforge.world.tasks.explore`, ExploreEnv); scored on the files opened

Each suite runs episodes through the agent loop like the other environment suites; task counts
come from `eval.n_for(<suite>)` (n_per_suite, else n). `expert_engine_for` scripts the oracle
for these task kinds (the checks that a perfect policy scores 1 use it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arcforge.eval.evaluator import SuiteOutput
from arcforge.types import Message, Task, ToolCall


def _run(ev: Any, cfg: Any, suite: str, tasks: list[Task]) -> SuiteOutput:
    """Greedy agent episodes on `tasks` in their environments -> SuiteOutput (reward >= 1)."""
    from arcforge.envs.registry import env_factory
    from arcforge.rollout.agent import AgentConfig, run_episodes

    budget = int(getattr(ev.model.config, "max_position_embeddings", 2048))
    acfg = AgentConfig(
        max_turns=cfg.max_turns,
        max_new_tokens=cfg.max_new_tokens,
        context_budget=budget,
        temperature=0.0,
    )
    trajs = run_episodes(ev.engine, ev.tokenizer, env_factory(ev.world), tasks, acfg)
    ex = [
        {
            "task": t.instruction[:300],
            "kind": t.kind,
            "reward": tr.reward,
            "finish": tr.finish_reason,
            "details": {k: v for k, v in tr.reward_details.items() if k != "output"},
        }
        for t, tr in list(zip(tasks, trajs))[:3]
    ]
    return SuiteOutput([float(tr.reward >= 1.0) for tr in trajs], ex)


def backend_tasks(world: Any, n: int) -> list[Task]:
    """Held-out code and SWE tasks, alternating, `n` in all."""
    code, swe = world.tasks("code", "test"), world.tasks("swe", "test")
    mixed = [t for pair in zip(code, swe) for t in pair]
    rest = code[len(swe) :] + swe[len(code) :]
    return (mixed + rest)[:n]


def suite_backend(ev: Any, cfg: Any):
    return _run(ev, cfg, "backend", backend_tasks(ev.world, cfg.n_for("backend")))


def suite_chained(ev: Any, cfg: Any):
    from arcforge.world.tasks.chains import chain_tasks

    return _run(ev, cfg, "chained", chain_tasks(ev.world.config.seed, cfg.n_for("chained")))


def suite_explore(ev: Any, cfg: Any):
    from arcforge.world.tasks.explore import explore_tasks

    tasks = explore_tasks(ev.world.repos, ev.world.config.seed, cfg.n_for("explore"))
    return _run(ev, cfg, "explore", tasks)


ENGINEERING_SUITES: dict[str, Callable] = {
    "backend": suite_backend,
    "chained": suite_chained,
    "explore": suite_explore,
}


def expert_messages(task: Task) -> list[Message]:
    """The oracle's assistant messages for a code, swe, chain or explore task."""
    from arcforge.world.text.demos import code_demo, swe_demo

    if task.kind == "code":
        return [m for m in code_demo(task) if m.role == "assistant"]
    if task.kind == "swe":
        return [m for m in swe_demo(task) if m.role == "assistant"]
    if task.kind == "chain":
        return [
            Message("assistant", f"```python\n{s['solution']}```", reasoning="Next step.")
            for s in task.metadata["steps"]
        ]
    if task.kind == "explore":
        target = task.metadata["target"]
        return [
            Message(
                "assistant",
                "",
                reasoning="First the layout.",
                tool_calls=[ToolCall("list_files", {"path": ""}, "call_0")],
            ),
            Message(
                "assistant",
                "",
                reasoning=f"{target} should hold it.",
                tool_calls=[ToolCall("read_file", {"path": target}, "call_1")],
            ),
            Message("assistant", f"Answer: {target}", reasoning="Found it."),
        ]
    raise ValueError(f"no scripted expert for task kind {task.kind!r} (code, swe, chain, explore)")


def expert_engine_for(tokenizer: Any, tasks: list[Task]):
    """A ScriptedEngine playing the oracle on `tasks` (keyed by their first user message)."""
    from arcforge.rollout.policies import ScriptedEngine

    return ScriptedEngine(tokenizer, {t.instruction: expert_messages(t) for t in tasks})
