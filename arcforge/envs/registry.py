"""Task kind -> environment: `make_env(task, world=None, **kw)` and `env_factory(world, **kw)`.

One small factory per kind, in a dict (`FACTORIES`, no if/elif chain). Each factory takes the
task, the world (or None) and keyword options for the environment, and returns an Environment
ready for `reset(task)`. The search corpus index is built once per world (or per corpus given)
and shared by every SearchEnv made from it. The sandboxed kinds (tir, code, terminal, swe)
import their modules on first use.

An environment of your own: `register_env("sql", lambda task, world, **kw: SQLEnv(**kw))`
before the run starts; tasks of kind "sql" then get it everywhere an environment is made.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from arcforge.envs.base import Environment
from arcforge.envs.math_env import MathEnv
from arcforge.envs.search_env import SearchEnv, SearchIndex
from arcforge.envs.tool_env import ToolEnv
from arcforge.types import Task

EnvFactory = Callable[..., Environment]  # (task, world, **kw) -> Environment

_INDEXES: dict[int, tuple[weakref.ref, SearchIndex]] = {}


def world_index(world: Any) -> SearchIndex:
    """The SearchIndex over `world.pages`, built on first use and cached while `world` lives."""
    key = id(world)
    hit = _INDEXES.get(key)
    if hit is not None and hit[0]() is world:
        return hit[1]
    index = SearchIndex(world.pages)
    _INDEXES[key] = (weakref.ref(world, lambda _r, k=key: _INDEXES.pop(k, None)), index)
    return index


def _math(task: Task, world: Any, **kw: Any) -> Environment:
    return MathEnv(**kw)


def _search(
    task: Task,
    world: Any,
    *,
    index: SearchIndex | None = None,
    corpus: list | None = None,
    **kw: Any,
) -> Environment:
    if index is None and corpus is not None:
        index = SearchIndex(corpus)
    if index is None:
        if world is None:
            raise ValueError(f"task {task.id} (search) needs a world, a corpus= or an index=")
        index = world_index(world)
    return SearchEnv(index, **kw)


def _tool(task: Task, world: Any, *, tools: dict | None = None, **kw: Any) -> Environment:
    if tools is None:
        if world is None:
            raise ValueError(f"task {task.id} (tool) needs a world or tools=")
        tools = world.tools()
    return ToolEnv(tools, **kw)


def _abe(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.abe_env import ABEEnv

    return ABEEnv(**kw)  # the task carries its own tools (context["abe"])


def _tir(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.tir_env import TIREnv

    return TIREnv(**kw)


def _code(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.code_env import CodeEnv

    return CodeEnv(**kw)


def _terminal(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.terminal_env import TerminalEnv

    return TerminalEnv(**kw)


def _swe(task: Task, world: Any, *, repos: Any = None, **kw: Any) -> Environment:
    from arcforge.envs.swe_env import SWEEnv

    if task.metadata.get("swe_env") and task.context.get("repo_path"):
        # an instance from a real repository: graded inside its own environment
        from arcforge.envs.swe_repo_env import task_env

        return task_env(task, kw.get("backend", "bwrap"))
    if repos is None:
        repos = world.repos if world is not None else ()
    return SWEEnv(repos, **kw)


def _mcp(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.mcp_env import MCPEnv  # needs the `mcp` extra only when used

    return MCPEnv(**kw)


def _slides(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.slides import SlidesEnv  # needs playwright + chromium only when used

    return SlidesEnv(**kw)


def _chain(task: Task, world: Any, **kw: Any) -> Environment:
    from arcforge.envs.chain_env import ChainEnv

    return ChainEnv(**kw)


def _explore(task: Task, world: Any, *, repos: Any = None, **kw: Any) -> Environment:
    from arcforge.envs.explore_env import ExploreEnv

    if repos is None:
        repos = world.repos if world is not None else ()
    return ExploreEnv(repos, **kw)


def _swarm(
    task: Task, world: Any, *, make: Callable[[Task], Environment] | None = None, **kw: Any
) -> Environment:
    # The orchestrator's environment runs agent episodes, so it lives in the rollout layer
    # (arcforge.rollout.swarm) and arrives bound to its frozen subagents as `make=`.
    if make is None:
        raise ValueError(
            f"task {task.id} (swarm) needs make=: a SwarmEnv factory bound to "
            "frozen subagents (arcforge.rollout.swarm.swarm_env_maker)"
        )
    return make(task)


# The sandboxed kinds import lazily: math/search/tool users need no sandbox.
FACTORIES: dict[str, EnvFactory] = {
    "math": _math,
    "search": _search,
    "tool": _tool,
    "abe": _abe,
    "tir": _tir,
    "code": _code,
    "terminal": _terminal,
    "swe": _swe,
    "slides": _slides,
    "chain": _chain,
    "explore": _explore,
    "swarm": _swarm,
    "mcp": _mcp,
}


def register_env(kind: str, factory: EnvFactory) -> None:
    """Add or replace the environment of a task kind.

    Args:
        kind: the `Task.kind` it serves.
        factory: `(task, world, **options) -> Environment`, a fresh environment per call
            (`world` may be None; options come from the caller, e.g. `env_factory`'s per kind).
    """
    FACTORIES[kind] = factory


def make_env(task: Task, world: Any = None, **kw: Any) -> Environment:
    """A fresh environment for `task` by its kind (call `reset(task)` next).

    Args:
        task: the task; `task.kind` picks the factory.
        world: the embedded world (needed by tool tasks and, without corpus=/index=, search).
        **kw: options of that kind's environment (e.g. system_prompt=, top_k=, corpus=).

    Raises:
        ValueError: for a kind with no environment, naming the kinds that have one.
    """
    factory = FACTORIES.get(task.kind)
    if factory is None:
        known = ", ".join(sorted(FACTORIES))
        raise ValueError(f"task {task.id}: no environment for kind {task.kind!r}; known: {known}")
    return factory(task, world, **kw)


def env_factory(world: Any = None, **kw_by_kind: dict[str, Any]) -> Callable[[Task], Environment]:
    """`task -> make_env(task, world, **options)` for `run_episodes`; options per kind, e.g.
    `env_factory(world, search={"top_k": 5}, math={"system_prompt": "..."})`."""

    def make(task: Task) -> Environment:
        return make_env(task, world, **kw_by_kind.get(task.kind, {}))

    return make
