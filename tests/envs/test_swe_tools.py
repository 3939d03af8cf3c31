"""view_function / replace_function: by-symbol tools in SWEEnv's bwrap sandbox."""

from __future__ import annotations

import dataclasses

import pytest

from arcforge.envs.sandbox_bwrap import bwrap_available
from arcforge.envs.swe_env import SWEEnv
from arcforge.envs.swe_tools import definitions
from arcforge.rollout.policies import expert_script, fixed_function
from arcforge.types import Message, ToolCall
from arcforge.world import WorldConfig, build_world

SRC = '''import functools


@functools.cache
def f(x):
    """Doc."""
    return x + 1


class K:
    def f(self):
        return 2

    async def g(self):
        return 3
'''


def test_definitions_cover_functions_methods_and_decorators():
    got = {d.name: (d.start, d.end) for d in definitions(SRC, "m.py")}
    assert got == {"f": (4, 7), "K.f": (11, 12), "K.g": (14, 15)}
    assert definitions("def broken(:\n", "m.py") == []


bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def world():
    return build_world(WorldConfig(scale=0.1))


@pytest.fixture(scope="module")
def env(world):
    e = SWEEnv(world.repos)
    yield e
    e.close()


def _call(env: SWEEnv, tool: str, **args) -> str:
    msg = Message("assistant", "", tool_calls=[ToolCall(tool, args, "c")])
    return env.step(msg).observations[0].content


@bwrap
def test_view_function_shows_the_definition_with_path_and_line_numbers(world, env):
    task = world.tasks("swe", "test")[0]
    bug = task.context["bug"]
    env.reset(task)
    out = _call(env, "view_function", name=bug["function"])
    head, *body = out.splitlines()
    path, span = head.rsplit(":", 1)
    start, end = map(int, span.split("-"))
    assert path == bug["path"] and start <= bug["line"] <= end
    wrong = bug["mutated"].splitlines()[bug["line"] - 1]
    assert f"{bug['line']:4d} {wrong}" in body
    assert "error: no function 'no_such_fn'" in _call(env, "view_function", name="no_such_fn")
    assert "is not a function name" in _call(env, "view_function", name="rm -rf /; x")
    # test files are never searched: the repo's tests define test_* functions
    assert _call(
        env, "view_function", name=task.validation.fail_to_pass[0].split("::")[1]
    ).startswith("error: no function")


@bwrap
def test_replace_function_fixes_the_bug_and_rejects_bad_code(world, env):
    task = world.tasks("swe", "test")[0]
    bug = task.context["bug"]
    env.reset(task)
    before = _call(env, "view_file", path=bug["path"])
    assert "error: code must be a valid Python definition" in _call(
        env, "replace_function", name=bug["function"], code="def other():\n    return 1\n"
    )
    assert "error: code must be" in _call(
        env, "replace_function", name=bug["function"], code="def ("
    )
    assert _call(env, "view_file", path=bug["path"]) == before  # nothing written on an error
    assert env.verify().score == 0.0
    env.reset(task)
    out = _call(env, "replace_function", name=bug["function"], code=fixed_function(task))
    assert out.startswith(f"ok: replaced {bug['function']} in {bug['path']}")
    after = _call(env, "view_file", path=bug["path"])
    assert after.splitlines()[bug["line"] - 1] == task.metadata["original_line"]
    assert len(after.splitlines()) == len(before.splitlines())
    assert env.verify().score == 1.0


@bwrap
def test_ambiguous_name_asks_for_a_path(world, env):
    task = dataclasses.replace(world.tasks("swe", "test")[0], tools=[])  # bash too
    bug = task.context["bug"]
    env.reset(task)
    src = _call(env, "view_file", path=bug["path"])
    _call(env, "bash", command=f"cp {bug['path']} copy_mod.py")
    out = _call(env, "replace_function", name=bug["function"], code=fixed_function(task))
    assert "defined 2 times" in out and "pass path" in out
    out = _call(env, "replace_function", name=bug["function"], code=fixed_function(task),
                path=bug["path"])  # fmt: skip
    assert out.startswith("ok: replaced")
    assert _call(env, "view_file", path="copy_mod.py") == src


@bwrap
def test_the_expert_solves_every_held_out_task(world, env):
    for task in world.tasks("swe", "test"):
        env.reset(task)
        for m in expert_script(task):
            res = env.step(m)
            assert not any(o.content.startswith("error") for o in res.observations)
        assert env.verify().score == 1.0, task.id


@bwrap
def test_made_up_function_names_run_and_the_expert_fixes_them(world, env):
    """swe_fresh_functions: the same bugs, in train repos whose functions have made-up names."""
    import random

    from arcforge.world.names import NameBank
    from arcforge.world.suites import swe_tasks

    plain, _ = swe_tasks(random.Random(3), world.repos, 1, 3, 1)
    fresh, test = swe_tasks(random.Random(3), world.repos, 1, 3, 1, NameBank(random.Random(4)),
                            0.0, 1.0)  # fmt: skip
    assert all("functions_renamed" not in t.context for t in test)  # held-out tasks keep theirs
    for a, b in zip(plain, fresh):
        made = b.context["functions_renamed"]
        old, new = a.context["bug"]["function"], b.context["bug"]["function"]
        assert made[old] == new != old and a.context["bug"]["line"] == b.context["bug"]["line"]
        assert f"`{new}`" in b.instruction and old not in b.instruction
        assert all(f"test_{new}_" in i for i in b.validation.fail_to_pass)
        env.reset(b)
        shown = _call(env, "view_function", name=new)
        assert shown.startswith(b.context["bug"]["path"]) and f"def {new}(" in shown
        assert _call(env, "view_function", name=old).startswith("error: no function")
        assert env.verify().score == 0.0  # the bug is there
        for m in expert_script(b):
            env.step(m)
        assert env.verify().score == 1.0, b.id
