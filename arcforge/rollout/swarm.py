"""Agent swarm: a trainable orchestrator that creates frozen subagents and runs them in parallel.

The orchestrator is an ordinary agent episode (`arcforge.rollout.agent`) in `SwarmEnv`, whose
tools are
- create_subagent(name, instructions, tools): a subagent template: the environment tools it
  gets (all from one environment kind of `toolsets`, e.g. search/open/answer) and its
  instructions (added to that environment's system prompt, which the frozen checkpoint was
  trained with);
- assign_task(agent, task): a sub-task for a subagent. Every assignment of one orchestrator
  reply is one parallel stage: its subagent episodes run concurrently (`SubagentPool`: one
  thread per episode, their generate calls merged into batches by an `EngineGateway` over the
  frozen engine), and each result comes back as that call's tool observation;
- answer(text): the final answer; a reply without tool calls is the answer too.
So the orchestrator's Trajectory is TITO like any other: its sampled tokens are its "model"
segments (loss 1) and everything a subagent wrote reaches it only as observation text (loss 0).
Each subagent episode is kept for inspection in `reward_details["swarm"]["subagents"]`
(messages, steps, finish, answer, wall-clock start and end).

Budgets (`SwarmBudget`): subagents created, assignments per stage and per episode, and the
subagents' sampled tokens per episode (checked before each stage; a stage in flight may
overshoot it). Every bad call (unknown tool or agent, missing or mistyped arguments, a
duplicate name, a spent budget) becomes an `error: ...` observation naming what was wrong,
never an exception. Subagent turns and reply lengths are the pool's AgentConfig.

Reward (`verify`, arcforge.rewards.swarm): r_task (share of list items right) + annealed
lambda1 * r_parallel + lambda2 * r_finish, at the training step `clock()` returns; every term
and each stage's longest subagent episode (for critical steps) are in the details.
Subagents are frozen: the pool's engine is a fixed checkpoint that no trainer updates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field

from arcforge.chat.validate import validate_call
from arcforge.config import Strict
from arcforge.envs.base import StepResult
from arcforge.rewards.math import extract_answer
from arcforge.rewards.swarm import (
    LIST_SEPARATOR,
    ParlReward,
    episode_critical_steps,
    finish_term,
    parallel_term,
    score_list,
    split_list,
)
from arcforge.rollout.agent import AgentConfig, run_episode, run_episodes
from arcforge.rollout.engines.base import Engine
from arcforge.rollout.gateway import EngineGateway
from arcforge.types import Message, Reward, Task, Tool, ToolCall, Trajectory, Validation

# environment kind -> the tools a subagent of that kind may be given
DEFAULT_TOOLSETS: dict[str, tuple[str, ...]] = {
    "search": ("search", "open", "answer"),
    "tool": ("lookup", "calculator"),
}
SYSTEM_PROMPT = "Split the task: create subagents, assign them tasks in one reply, then answer."


@dataclass(frozen=True)
class SwarmBudget:
    """Per orchestrator episode: subagents created, assignments per stage (one reply) and in
    all, subagent tokens sampled, and characters of a subagent's answer shown back."""

    max_subagents: int = 4
    max_parallel: int = 8
    max_assignments: int = 16
    subagent_tokens: int = 8192
    result_chars: int = 300

    def __post_init__(self) -> None:
        for k in (
            "max_subagents",
            "max_parallel",
            "max_assignments",
            "subagent_tokens",
            "result_chars",
        ):
            if getattr(self, k) < 1:
                raise ValueError(f"SwarmBudget.{k} must be >= 1, got {getattr(self, k)}")


@dataclass
class SubJob:
    """One assignment: the subagent template (name, instructions, tools, kind) and its task."""

    agent: str
    instructions: str
    tools: list[str]
    kind: str
    task: str
    task_id: str


@dataclass
class SubResult:
    """A finished assignment: its episode (None when it could not run), wall-clock times."""

    job: SubJob
    trajectory: Trajectory | None
    start: float
    end: float
    error: str | None = None

    @property
    def steps(self) -> int:
        return 0 if self.trajectory is None else self.trajectory.reward_details["agent"]["turns"]

    @property
    def finished(self) -> bool:
        return self.trajectory is not None and self.trajectory.finish_reason == "answer"

    @property
    def answer(self) -> str | None:
        tr = self.trajectory
        if tr is None:
            return None
        ans = tr.reward_details.get("answer")
        if ans is None and tr.messages and tr.messages[-1].role == "assistant":
            ans = extract_answer(tr.messages[-1].content) or None
        return None if ans is None else str(ans)

    @property
    def tokens(self) -> int:
        tr = self.trajectory
        return (
            0 if tr is None else sum(len(s.token_ids) for s in tr.segments if s.source == "model")
        )

    def record(self, t0: float) -> dict[str, Any]:
        """A JSON-ready record of the episode (times in seconds after `t0`)."""
        tr = self.trajectory
        return {
            "agent": self.job.agent,
            "task": self.job.task,
            "tools": self.job.tools,
            "steps": self.steps,
            "finish": tr.finish_reason if tr else "error",
            "answer": self.answer,
            "tokens": self.tokens,
            "error": self.error,
            "start": round(self.start - t0, 4),
            "end": round(self.end - t0, 4),
            "messages": [m.to_dict() for m in tr.messages] if tr else [],
        }


class _SubagentEnv:
    """An environment seen through a subagent template: only the granted tools, the
    orchestrator's instructions after the environment's own system prompt."""

    def __init__(self, inner: Any, allowed: Sequence[str], instructions: str) -> None:
        self.inner, self.allowed, self.instructions = inner, set(allowed), instructions
        self.tools: list[Tool] = []

    def reset(self, task: Task) -> list[Message]:
        msgs = list(self.inner.reset(task))
        self.tools = [t for t in self.inner.tools if t.name in self.allowed]
        if self.instructions.strip():
            system = [m.content for m in msgs if m.role == "system"]
            text = "\n".join([*system, self.instructions.strip()])
            msgs = [Message("system", text)] + [m for m in msgs if m.role != "system"]
        return msgs

    def step(self, message: Message) -> StepResult:
        granted = [c for c in message.tool_calls if c.name in self.allowed]
        refused = [
            Message(
                "tool",
                f"error: tool {c.name!r} was not granted; granted: "
                f"{', '.join(sorted(self.allowed))}",
                tool_call_id=c.id or None,
                name=c.name,
            )
            for c in message.tool_calls
            if c.name not in self.allowed
        ]
        if refused and not granted:
            return StepResult(refused, done=False)
        result = self.inner.step(replace(message, tool_calls=granted))
        return StepResult(refused + list(result.observations), result.done, result.info)

    def verify(self) -> Reward:
        return self.inner.verify()

    def close(self) -> None:
        self.inner.close()


class SubagentPool:
    """Runs subagent episodes concurrently on a frozen engine.

    Args:
        engine: the frozen subagents' engine (wrapped in an EngineGateway unless it is one, so
            that concurrent episodes' generate calls merge into batches).
        tokenizer: that model's tokenizer.
        env_factory: task -> environment (e.g. arcforge.envs.registry.env_factory(world)).
        cfg: the subagents' agent config (their turn and reply budgets).
        toolsets: environment kind -> the tools a subagent of that kind may be given.
        max_workers: subagent episodes running at once.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        env_factory: Callable[[Task], Any],
        cfg: AgentConfig = AgentConfig(
            max_turns=4, max_new_tokens=256, context_budget=4096, temperature=0.0
        ),
        toolsets: Mapping[str, Sequence[str]] = DEFAULT_TOOLSETS,
        max_workers: int = 8,
    ) -> None:
        self._own_gateway = not isinstance(engine, EngineGateway)
        self.engine = EngineGateway(engine, "subagents") if self._own_gateway else engine
        self.tokenizer, self.env_factory, self.cfg = tokenizer, env_factory, cfg
        self.toolsets = {k: tuple(v) for k, v in toolsets.items()}
        self.kind_of = {t: k for k, ts in self.toolsets.items() for t in ts}
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="subagent")
        self._lock = threading.Lock()
        self._closed = False

    def _run_one(self, job: SubJob) -> SubResult:
        start = time.monotonic()
        task = Task(
            job.task_id,
            job.kind,
            job.task,
            tools=list(job.tools),  # type: ignore[arg-type]
            validation=Validation(answer=""),
            source="swarm:subagent",
        )
        env = None
        try:
            env = _SubagentEnv(self.env_factory(task), job.tools, job.instructions)
            traj = run_episode(self.engine, self.tokenizer, env, task, self.cfg)
            return SubResult(job, traj, start, time.monotonic())
        except Exception as exc:  # a subagent failure is the orchestrator's observation
            return SubResult(job, None, start, time.monotonic(), f"{type(exc).__name__}: {exc}")
        finally:
            if env is not None:
                env.close()

    def run(self, jobs: Sequence[SubJob]) -> list[SubResult]:
        """Run `jobs` concurrently; results in job order."""
        with self._lock:
            if self._closed:
                raise RuntimeError("SubagentPool is closed")
        return list(self._executor.map(self._run_one, jobs))

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True)
        if self._own_gateway:
            self.engine.close()


@dataclass
class _State:
    # subagent name -> (instructions, tools, environment kind)
    agents: dict[str, tuple[str, list[str], str]] = field(default_factory=dict)
    results: list[list[SubResult]] = field(default_factory=list)  # per stage
    answer: str | None = None
    assignments: int = 0
    tokens: int = 0


class SwarmEnv:
    """The orchestrator's environment (see the module docstring).

    Args:
        pool: the frozen subagents.
        budget: the episode's budgets.
        reward: the PARL reward and its annealing.
        clock: the current training step (for the lambdas); evaluation leaves it at 0.
        system_prompt: the orchestrator's system message (None: none).
    """

    def __init__(
        self,
        pool: SubagentPool,
        budget: SwarmBudget = SwarmBudget(),
        reward: ParlReward = ParlReward(),
        clock: Callable[[], int] = lambda: 0,
        system_prompt: str | None = SYSTEM_PROMPT,
    ) -> None:
        self.pool, self.budget, self.reward, self.clock = pool, budget, reward, clock
        self.system_prompt = system_prompt
        self.tools = [
            Tool.from_function(f) for f in (self.create_subagent, self.assign_task, self.answer)
        ]
        self._task: Task | None = None
        self._s = _State()
        self._t0 = time.monotonic()

    # ------------------------------------------------------------ tools (schemas; see step)

    def create_subagent(self, name: str, instructions: str, tools: list[str]) -> str:
        """Create a subagent.

        Args:
            name: its name.
            instructions: what it should do.
            tools: its tools, of one kind: search, open, answer or lookup, calculator.
        """
        s, b = self._s, self.budget
        if not name.strip():
            return "error: create_subagent needs a non-empty name"
        if name in s.agents:
            return f"error: a subagent named {name!r} exists; pick a new name"
        if len(s.agents) >= b.max_subagents:
            return f"error: over budget: at most {b.max_subagents} subagents per episode"
        known = self.pool.kind_of
        bad = [t for t in tools if t not in known]
        if not tools or bad:
            what = f"unknown tool(s) {bad}" if bad else "no tools given"
            sets = "; ".join(f"{k}: {', '.join(v)}" for k, v in self.pool.toolsets.items())
            return f"error: {what}; tools of one kind from: {sets}"
        kinds = sorted({known[t] for t in tools})
        if len(kinds) > 1:
            return f"error: tools of one kind only; got tools of {', '.join(kinds)}"
        s.agents[name] = (instructions, list(dict.fromkeys(tools)), kinds[0])
        return f"created subagent {name!r} with tools {', '.join(s.agents[name][1])}"

    def assign_task(self, agent: str, task: str) -> str:
        """Give a subagent a task (one reply's tasks run in parallel).

        Args:
            agent: a subagent's name.
            task: its task.
        """
        raise RuntimeError("assign_task runs through SwarmEnv.step")  # schema only

    def answer(self, text: str) -> str:
        """Give the final answer.

        Args:
            text: the answer; a list as "a; b; c".
        """
        self._s.answer = str(text)
        return "answer recorded"

    # ------------------------------------------------------------ protocol

    def reset(self, task: Task) -> list[Message]:
        if not task.metadata.get("values") and task.validation.answer is None:
            raise ValueError(
                f"task {task.id}: SwarmEnv needs metadata['values'] or validation.answer"
            )
        self._task, self._s, self._t0 = task, _State(), time.monotonic()
        msgs = [Message("system", self.system_prompt)] if self.system_prompt else []
        return msgs + [Message("user", task.instruction)]

    def _check_assign(self, call: ToolCall, queued: int) -> str | SubJob:
        s, b = self._s, self.budget
        name, text = str(call.arguments["agent"]), str(call.arguments["task"]).strip()
        if name not in s.agents:
            have = ", ".join(sorted(s.agents)) or "none yet: call create_subagent first"
            return f"error: unknown subagent {name!r}; subagents: {have}"
        if not text:
            return "error: assign_task needs a non-empty task"
        if queued >= b.max_parallel:
            return f"error: over budget: at most {b.max_parallel} assignments per reply"
        if s.assignments + queued >= b.max_assignments:
            return f"error: over budget: at most {b.max_assignments} assignments per episode"
        if s.tokens >= b.subagent_tokens:
            return f"error: over budget: the subagents' {b.subagent_tokens} tokens are spent"
        instr, tools, kind = s.agents[name]
        tid = f"{self._task.id if self._task else 'swarm'}/{name}/{s.assignments + queued}"
        return SubJob(name, instr, tools, kind, text, tid)

    def _observe(self, r: SubResult) -> str:
        if r.error is not None:
            return f"error: subagent {r.job.agent!r} failed: {r.error}"
        ans = (r.answer or "")[: self.budget.result_chars]
        if r.finished and ans:
            return f"{r.job.agent}: {ans}"
        return f"{r.job.agent} gave no answer ({r.trajectory.finish_reason}, {r.steps} steps)"  # type: ignore[union-attr]

    def step(self, message: Message) -> StepResult:
        s = self._s
        if not message.tool_calls:  # a plain reply is the final answer
            s.answer = message.content
            return StepResult([], done=True)
        by_name = {t.name: t for t in self.tools}
        texts: list[str | None] = []
        jobs: list[tuple[int, SubJob]] = []
        for call in message.tool_calls:
            problem = validate_call(call, by_name)
            if problem is not None:
                texts.append(f"error: {problem}")
            elif call.name == "assign_task":
                job = self._check_assign(call, len(jobs))
                texts.append(job if isinstance(job, str) else None)
                if isinstance(job, SubJob):
                    jobs.append((len(texts) - 1, job))
            elif call.name == "create_subagent":
                a = call.arguments
                texts.append(
                    self.create_subagent(
                        str(a["name"]), str(a["instructions"]), [str(t) for t in a["tools"]]
                    )
                )
            else:
                texts.append(self.answer(str(call.arguments["text"])))
        if jobs:
            results = self.pool.run([j for _, j in jobs])
            s.results.append(results)
            s.assignments += len(results)
            s.tokens += sum(r.tokens for r in results)
            for (i, _), r in zip(jobs, results):
                texts[i] = self._observe(r)
        obs = [
            Message("tool", str(t), tool_call_id=c.id or None, name=c.name)
            for c, t in zip(message.tool_calls, texts)
        ]
        return StepResult(obs, done=s.answer is not None)

    def verify(self) -> Reward:
        if self._task is None:
            raise RuntimeError("SwarmEnv.verify called before reset")
        s, task = self._s, self._task
        ref = list(task.metadata.get("values") or split_list(str(task.validation.answer)))
        r_task, solved = score_list(s.answer, ref)
        done = [r for stage in s.results for r in stage]
        widths = [len(stage) for stage in s.results]
        terms = self.reward(
            r_task,
            parallel_term(widths, self.budget.max_parallel),
            finish_term([r.finished for r in done]),
            int(self.clock()),
        )
        stage_steps = [max(r.steps for r in stage) for stage in s.results]
        swarm = {
            **{k: v for k, v in terms.items() if k != "reward"},
            "subagents": len(s.agents),
            "assignments": len(done),
            "stages": len(s.results),
            "stage_steps": stage_steps,
            "subagent_tokens": s.tokens,
            "subagent_steps": sum(r.steps for r in done),
            "episodes": [r.record(self._t0) for r in done],
        }
        details = {"answer": s.answer, "solved": float(solved), "item_acc": r_task, "swarm": swarm}
        return Reward(terms["reward"], details)

    def close(self) -> None:
        pass


def run_swarm_episodes(
    engine: Engine,
    tokenizer: Any,
    pool: SubagentPool,
    tasks: Sequence[Task],
    cfg: AgentConfig = AgentConfig(),
    budget: SwarmBudget = SwarmBudget(),
    reward: ParlReward = ParlReward(),
    clock: Callable[[], int] = lambda: 0,
) -> list[Trajectory]:
    """Run one orchestrator episode per task (stepped together, as `run_episodes` does), each
    in its own SwarmEnv over `pool`. `reward_details["swarm"]["critical_steps"]` is set from
    the agent loop's turn count.

    Returns:
        The orchestrators' trajectories, in task order.
    """

    def make(_task: Task) -> SwarmEnv:
        return SwarmEnv(pool, budget, reward, clock)

    trajs = run_episodes(engine, tokenizer, make, tasks, cfg)
    for tr in trajs:
        if isinstance(tr.reward_details.get("swarm"), dict):
            tr.reward_details["swarm"]["critical_steps"] = episode_critical_steps(tr.reward_details)
    return trajs


def swarm_env_maker(
    pool: SubagentPool,
    budget: SwarmBudget = SwarmBudget(),
    reward: ParlReward = ParlReward(),
    clock: Callable[[], int] = lambda: 0,
) -> Callable[[Task], SwarmEnv]:
    """`task -> SwarmEnv` over one shared pool: the `make=` option of the registry's swarm kind
    (`env_factory(world, swarm={"make": swarm_env_maker(pool, ...)})`)."""
    return lambda _task: SwarmEnv(pool, budget, reward, clock)


def list_answer(values: Sequence[str]) -> str:
    """The answer text of a list, as SwarmEnv and the wide tasks expect it."""
    return LIST_SEPARATOR.join(values)


class SwarmCfg(Strict):
    """The `swarm:` block of an agentic_rl stage: tasks of kind "swarm" run as orchestrator
    episodes (the trained policy) over subagents frozen at `subagents`."""

    subagents: str  # the frozen checkpoint: a stage name of this run or a checkpoint directory
    max_subagents: int = Field(4, ge=1)
    max_parallel: int = Field(8, ge=1)
    max_assignments: int = Field(16, ge=1)
    subagent_tokens: int = Field(8192, ge=1)
    subagent_max_turns: int = Field(4, ge=1)
    subagent_max_new_tokens: int = Field(96, ge=1)
    subagent_temperature: float = Field(0.0, ge=0)  # greedy: a reward the orchestrator owns
    lambda1: float = Field(0.1, ge=0)
    lambda2: float = Field(0.1, ge=0)
    anneal_steps: int = Field(50, ge=1)  # trainer steps until lambda1 = lambda2 = 0

    def budget(self) -> SwarmBudget:
        return SwarmBudget(
            self.max_subagents, self.max_parallel, self.max_assignments, self.subagent_tokens
        )

    def reward(self) -> ParlReward:
        return ParlReward(self.lambda1, self.lambda2, self.anneal_steps)

    def pool(
        self,
        engine: Engine,
        tokenizer: Any,
        env_factory: Callable[[Task], Any],
        context_budget: int,
    ) -> SubagentPool:
        """The frozen subagents over `engine` (a LocalEngine of the `subagents` checkpoint)."""
        cfg = AgentConfig(
            max_turns=self.subagent_max_turns,
            max_new_tokens=self.subagent_max_new_tokens,
            context_budget=context_budget,
            temperature=self.subagent_temperature,
        )
        return SubagentPool(engine, tokenizer, env_factory, cfg, max_workers=self.max_parallel)
