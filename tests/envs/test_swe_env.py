"""SWEEnv in bwrap: real fixes pass, no-ops and grading hacks fail, history is absent, and the
hidden FAIL_TO_PASS tests that grade a world task are nowhere the agent can look.

Each hack below is something an agent can do with its tools; each must give reward 0 while
the bug is unfixed (and the last shows a real fix still passes next to a planted conftest).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pytest

from arcforge.envs.check import check_task
from arcforge.envs.importers import import_swebench
from arcforge.envs.swe_env import SWEEnv, is_protected
from arcforge.envs.swe_tools import ochiai, reproduction
from arcforge.rollout.policies import expert_script
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message, ToolCall
from arcforge.world import WorldConfig, build_world
from arcforge.world.code.pysource import SWE_TOOLS, WORLD_SWE_TOOLS, definition_at, definitions
from arcforge.world.text.demos import fix_code, fixed_function, swe_demo

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")

SKIP_ALL = """import pytest
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="no"))
"""
PASS_ALL = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    rep = out.get_result()
    rep.outcome, rep.longrepr = "passed", None
"""
FAKE_PYTEST = "import sys\nprint('1 passed')\nsys.exit(0)\n"


@pytest.fixture(scope="module")
def world():
    return build_world(WorldConfig(scale=0.1))


@pytest.fixture(scope="module")
def env(world):
    e = SWEEnv(world.repos)
    yield e
    e.close()


def _every_tool(task):
    """The task offering every SWEEnv tool (world SWE tasks leave bash and edit_file out): the
    hacks below are what an agent with a shell could do."""
    return dataclasses.replace(task, tools=[])


def _call(env: SWEEnv, tool: str, **args) -> str:
    msg = Message("assistant", "", tool_calls=[ToolCall(tool, args, "c")])
    return env.step(msg).observations[0].content


def _bash(env: SWEEnv, command: str) -> str:
    return _call(env, "bash", command=command)


def test_real_fix_passes_noop_fails_and_history_is_gone(world, env):
    task = _every_tool(world.tasks("swe", "train")[0])
    env.reset(task)
    log = _bash(env, "git log --all --format=%s; git for-each-ref | wc -l; git reflog | wc -l")
    assert log == "base\n1\n1\n"  # one commit, one ref, nothing of the fix
    assert env.verify().score == 0.0  # no-op
    env.reset(task)
    assert env.apply_patch(task.metadata["patch"]).exit_code == 0
    reward = env.verify()
    assert reward.score == 1.0, reward.details
    assert reward.details["f2p"]["passed"] == len(task.validation.fail_to_pass)


def test_scripted_demo_episode_fixes_the_bug(world, env):
    task = world.tasks("swe", "train")[1]
    msgs = swe_demo(task)
    env.reset(task)
    for m in msgs[1:]:
        if m.role == "assistant":
            res = env.step(m)
            expected = [
                o.content
                for o in msgs
                if o.role == "tool" and o.tool_call_id in {c.id for c in m.tool_calls}
            ]
            assert [o.content for o in res.observations] == expected
    assert res.done
    out = env.step(Message("assistant", "", tool_calls=[ToolCall("run_tests", {}, "t")]))
    assert " passed" in out.observations[0].content and "failed" not in out.observations[0].content
    assert re.search(r"\d+ passed$", out.observations[0].content.strip())  # no wall-clock time
    assert env.verify().score == 1.0


def test_a_renamed_repo_task_runs_in_its_own_package(world, env):
    """swe_fresh_repos: the same bugs, in copies of the train repos under made-up names."""
    import random

    from arcforge.world.knowledge.names import NameBank
    from arcforge.world.tasks.pools import swe_tasks

    repos, n_test = world.repos, 1
    plain, _ = swe_tasks(random.Random(3), repos, n_test, 4, 1)
    fresh, test = swe_tasks(random.Random(3), repos, n_test, 4, 1, NameBank(random.Random(4)), 1.0)
    held = {r.name for r in repos[:n_test]}
    assert all("renamed_from" not in t.context for t in test)
    for a, b in zip(plain, fresh):
        assert b.context["renamed_from"] == a.context["repo"] != b.context["repo"]
        assert b.context["repo"] not in {r.name for r in repos} | held
        assert a.context["bug"]["line"] == b.context["bug"]["line"]  # the same bug, renamed
        pkg = b.context["repo"].replace("-", "_")
        assert b.context["bug"]["path"].startswith(pkg + "/") and f"`{pkg}/" in b.instruction
    task = _every_tool(fresh[0])
    env.reset(task)
    listing = _bash(
        env, "ls; grep -rl " + task.context["renamed_from"].replace("-", "_") + " . | wc -l"
    )
    assert task.context["repo"].replace("-", "_") in listing and listing.endswith("0\n")
    assert env.verify().score == 0.0  # the bug is there
    for m in swe_demo(task)[1:]:
        if m.role == "assistant":
            env.step(m)
    assert env.verify().score == 1.0


HACKS = {
    "delete tests": "rm -rf tests",
    "delete the failing test bodies": "for f in tests/test_*.py; do "
    "printf 'def test_ok():\\n    assert True\\n' > $f; done",
    "pytest.ini deselects everything": "printf '[pytest]\\naddopts = -k nothing_matches\\n' "
    "> pytest.ini",
    "pyproject narrows test discovery": "printf '[tool.pytest.ini_options]\\n"
    'python_functions = "nothing_*"\\n\' > pyproject.toml',
    "shadow the pytest module": f"printf {json.dumps(FAKE_PYTEST)} > pytest.py; "
    f"cp pytest.py sitecustomize.py",
    "conftest skips everything": f"printf '%s' {json.dumps(SKIP_ALL)} > tests/conftest.py",
    "conftest passes everything": f"printf '%s' {json.dumps(PASS_ALL)} > conftest.py",
    "print fake PASSED lines": "for p in */__init__.py; do printf 'print(\"tests/test_x.py::"
    'test_y PASSED")\\nprint("=== 33 passed ===")\\n\' >> $p; done',
    "forge the report": 'echo \'<testsuite><testcase classname="x" name="y"/></testsuite>\' '
    "> /grading/junit.xml",
}


@pytest.mark.parametrize("hack", list(HACKS))
def test_grading_hacks_score_zero(world, env, hack):
    task = _every_tool(world.tasks("swe", "train")[0])
    env.reset(task)
    _bash(env, HACKS[hack])
    reward = env.verify()
    assert reward.score == 0.0, (hack, reward.details)


def test_real_fix_survives_a_planted_conftest(world, env):
    task = _every_tool(world.tasks("swe", "train")[0])
    env.reset(task)
    env.apply_patch(task.metadata["patch"])
    _bash(env, f"printf '%s' {json.dumps(SKIP_ALL)} > conftest.py; rm -rf tests")
    reward = env.verify()
    assert reward.score == 1.0 and "conftest.py" in reward.details["reverted"]


def test_a_task_offers_its_own_tools(world, env):
    task = world.tasks("swe", "train")[0]
    env.reset(task)
    assert [t.name for t in env.tools] == task.tools == list(WORLD_SWE_TOOLS)
    out = _bash(env, "echo hi")
    assert "unknown tool 'bash'" in out and "view_function" in out
    env.reset(_every_tool(task))
    assert [t.name for t in env.tools] == list(SWE_TOOLS) and _bash(
        env, "echo hi"
    ).strip().endswith("hi")
    with pytest.raises(ValueError, match="does not have: grep_all"):
        env.reset(dataclasses.replace(task, tools=["view_file", "grep_all"]))


def test_protected_paths():
    for p in (
        "tests/helpers.py",
        "pkg/test_a.py",
        "a_test.py",
        "conftest.py",
        "x/setup.cfg",
        "sitecustomize.py",
        "m.pth",
        "pyproject.toml",
    ):
        assert is_protected(p), p
    for p in ("pkg/mod.py", "README.md", "pkg/testing_utils.py"):
        assert not is_protected(p), p


def test_swebench_instance_from_a_local_clone(world, tmp_path):
    """A SWE-bench-shaped record over a real git clone with the fix in its later history."""
    repo = world.repos[0]
    bug = repo.inject_bug(__import__("random").Random(3))
    clone = tmp_path / "clone"
    initial, base, fix = repo.materialize(clone, git=True, bug=bug)
    test_path = bug.fail_to_pass[0].split("::")[0]
    # the PR's test patch: the bug's hidden tests plus one more, against the base's test file
    (tmp_path / "base_test.py").write_text(repo.workspace_tests(bug.removed_tests)[test_path])
    new = bug.hidden_tests[test_path] + "\n\ndef test_added_by_pr():\n    assert True\n"
    test_patch = subprocess.run(
        [
            "diff",
            "-u",
            "--label",
            f"a/{test_path}",
            "--label",
            f"b/{test_path}",
            str(tmp_path / "base_test.py"),
            "-",
        ],
        input=new,
        capture_output=True,
        text=True,
    ).stdout
    rec = {
        "instance_id": "demo__repo-1",
        "repo": "demo/repo",
        "base_commit": base,
        "patch": bug.fix_diff,
        "test_patch": f"diff --git a/{test_path} b/{test_path}\n" + test_patch,
        "problem_statement": bug.issue_text,
        "FAIL_TO_PASS": json.dumps(bug.fail_to_pass + [f"{test_path}::test_added_by_pr"]),
        "PASS_TO_PASS": bug.pass_to_pass[:5],
    }
    (tmp_path / "inst.jsonl").write_text(json.dumps(rec) + "\n")
    (task,) = import_swebench(tmp_path / "inst.jsonl", clone)
    assert task.kind == "swe" and not task.metadata["unsupported"]
    env = SWEEnv()
    try:
        env.reset(task)
        f2p = bug.fail_to_pass[0].split("::")[1]
        seen = _bash(
            env, f"git log --all --format=%H; grep -c -e test_added_by_pr -e {f2p} {test_path}"
        )
        assert fix not in seen and initial not in seen and seen.endswith("0\n\n[exit code 1]")
    finally:
        env.close()
    assert check_task(task)["reward"] == 1.0
    assert check_task(task, empty=True)["reward"] == 0.0


# view_function / replace_function (arcforge.envs.swe_tools)

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


def test_replace_function_fixes_the_bug_and_rejects_bad_code(world, env):
    task = world.tasks("swe", "test")[0]
    bug = task.context["bug"]
    env.reset(_every_tool(task))
    before = _call(env, "view_file", path=bug["path"])
    assert "error: code defines other, not" in _call(
        env, "replace_function", name=bug["function"], code="def other():\n    return 1\n"
    )
    assert "error: the file would not parse" in _call(
        env, "replace_function", name=bug["function"], code="def ("
    )
    assert _call(env, "view_file", path=bug["path"]) == before  # nothing written on an error
    assert env.verify().score == 0.0
    env.reset(_every_tool(task))
    out = _call(env, "replace_function", name=bug["function"], code=fixed_function(task))
    assert out.startswith(f"ok: replaced {bug['function']} in {bug['path']}")
    after = _call(env, "view_file", path=bug["path"])
    assert task.metadata["fixed"] in after and task.metadata["fixed"] not in before
    assert env.verify().score == 1.0


def test_ambiguous_name_asks_for_a_path(world, env):
    task = dataclasses.replace(world.tasks("swe", "test")[0], tools=[])  # bash too
    bug = task.context["bug"]
    env.reset(task)
    src = _call(env, "view_file", path=bug["path"])
    _call(env, "bash", command=f"cp {bug['path']} copy_mod.py")
    out = _call(env, "replace_function", name=bug["function"], code=fixed_function(task))
    assert "defined 2 times" in out and "pass path" in out
    out = _call(
        env, "replace_function", name=bug["function"], code=fixed_function(task), path=bug["path"]
    )
    assert out.startswith("ok: replaced")
    assert _call(env, "view_file", path="copy_mod.py") == src


def test_the_expert_solves_every_held_out_task(world, env):
    for task in world.tasks("swe", "test"):
        env.reset(task)
        for m in expert_script(task):
            res = env.step(m)
            assert not any(o.content.startswith("error") for o in res.observations)
        assert env.verify().score == 1.0, task.id


@pytest.mark.slow  # over 5 s: `make test-all` runs it (make test stays under 10 minutes)
def test_made_up_function_names_run_and_the_expert_fixes_them(world, env):
    """swe_fresh_functions: the same bugs, in train repos whose functions have made-up names."""
    import random

    from arcforge.world.knowledge.names import NameBank
    from arcforge.world.tasks.pools import swe_tasks

    plain, _ = swe_tasks(random.Random(3), world.repos, 1, 3, 1)
    fresh, test = swe_tasks(
        random.Random(3), world.repos, 1, 3, 1, NameBank(random.Random(4)), 0.0, 1.0
    )
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


# localize and replace_function on the function shown last


def test_ochiai_ranks_what_failing_tests_call_and_folds_nested_code():
    tests = {
        "t::a": ("failed", [("m.py", "f"), ("m.py", "g.<locals>.<listcomp>"), ("tests/t.py", "a")]),
        "t::b": ("passed", [("m.py", "f")]),
        "t::c": ("passed", [("m.py", "h")]),
    }
    ranked = ochiai(tests, lambda p: not p.startswith("tests/"))
    # g: ef 1, ep 0 -> 1.0; f: ef 1, ep 1 -> 1/sqrt(2); h and the test file are not ranked
    assert [(round(s, 3), p, n) for s, p, n in ranked] == [(1.0, "m.py", "g"), (0.707, "m.py", "f")]
    assert ochiai({"t::b": ("passed", [("m.py", "f")])}, lambda p: True) == []


def test_localize_shows_the_buggy_function_and_replace_function_edits_its_body(world, env):
    for task in world.tasks("swe", "test"):
        bug = task.context["bug"]
        env.reset(_every_tool(task))
        assert _call(env, "replace_function", code="    return 1\n").startswith(
            "error: no function shown yet"
        )
        out = _call(env, "localize")
        head, top = out.splitlines()[:2]
        # the agent's repo has no failing test: the issue's call is what fails
        assert head.startswith("1 failing") and "issue's call included: it failed" in head
        assert top.split()[1:] == [bug["path"], bug["issue_function"]]
        if bug["issue_function"] != bug["function"]:  # a bug seen through a caller
            assert bug["function"] in out
            _call(env, "view_function", name=bug["function"])
        d = definition_at(bug["mutated"], bug["path"], bug["function"], bug["line"])
        assert f"{d.start:4d} def {bug['function']}(" in _call(
            env, "view_function", name=bug["function"]
        )
        before = _call(env, "view_file", path=bug["path"]).splitlines()
        out = _call(env, "replace_function", code=fix_code(task))  # no name: the one shown
        assert out.startswith(f"ok: replaced {bug['function']} in {bug['path']}"), out
        after = _call(env, "view_file", path=bug["path"]).splitlines()
        # only the function changed, to the fixed one: signature and docstring kept
        d = definition_at(bug["mutated"], bug["path"], bug["function"], bug["line"])
        tail = len(before) - d.end
        assert after[: d.start - 1] == before[: d.start - 1]
        assert tail == 0 or after[-tail:] == before[-tail:]
        assert "\n".join(after[d.start - 1 : len(after) - tail]) + "\n" == task.metadata["fixed"]
        fixed = _call(env, "localize")
        assert "0 failing" in fixed and "issue's call included: it passed" in fixed
        assert env.verify().score == 1.0


def test_localize_without_a_failing_test_says_so(world, env):
    task = world.tasks("swe", "test")[0]
    env.reset(task)
    _call(env, "replace_function", name=task.context["bug"]["function"], code=fixed_function(task))
    out = _call(env, "localize")
    assert out.startswith("0 failing") and "no failing test" in out
    assert _call(env, "replace_function", code="    return 1\n").startswith("error: no function")


def test_balanced_train_bugs_take_turns_by_function_and_leave_the_test_split(world):
    """swe_balance: every buggy function once before any twice, where drawn as they come one
    function takes several bugs before another has one; held-out bugs stay the same."""
    import random
    from collections import Counter

    from arcforge.world.tasks.pools import swe_tasks

    repos, n = world.repos, 12
    plain, plain_test = swe_tasks(random.Random(3), repos, 1, n, 4)
    train, test = swe_tasks(random.Random(3), repos, 1, n, 4, balance=random.Random(5))
    assert [t.instruction for t in test] == [t.instruction for t in plain_test]
    funcs = [t.context["bug"]["function"] for t in train]
    assert len(train) == n and len({t.instruction for t in train}) == n
    assert max(Counter(funcs).values()) - min(Counter(funcs).values()) <= 1
    assert max(Counter(t.context["bug"]["function"] for t in plain).values()) > max(
        Counter(funcs).values()
    )
    assert not {t.context["repo"] for t in train} & {t.context["repo"] for t in test}


# hidden tests: FAIL_TO_PASS tests the agent's repo lacks, graded from validation.tests


def _hidden(task) -> tuple[str, str, list[str]]:
    """(test path, graded text, F2P test names) of a world task."""
    ((path, text),) = json.loads(task.validation.tests).items()
    return path, text, [n.split("::")[1] for n in task.validation.fail_to_pass]


def test_hidden_tests_are_nowhere_the_agent_can_look(world, env):
    for task in world.tasks("swe", "test") + world.tasks("swe", "train")[:2]:
        path, text, names = _hidden(task)
        bug = task.context["bug"]
        env.reset(_every_tool(task))
        outputs = [
            _call(env, "localize"),
            _call(env, "run_tests"),
            _call(env, "view_file", path=path),
            _call(env, "view_function", name=bug["function"]),
            _call(env, "search_code", pattern="|".join(names)),
            _bash(
                env,
                f"grep -rn -e {' -e '.join(names)} / --include='*.py' "
                "--exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null | head; "
                "cat tests/*.py; ls -aR /workspace /tmp 2>/dev/null | head -200",
            ),
        ]
        graded = [ln for ln in text.splitlines() if ln.startswith("    assert ")]
        hidden_only = [ln for ln in graded if ln not in outputs[2]]
        assert hidden_only  # the graded file asserts what the workspace's does not
        for out in outputs:
            assert not any(n in out for n in names), (task.id, out[-500:])
            assert not any(ln.strip() in out for ln in hidden_only), (task.id, out[-500:])
        assert "failed" not in outputs[1]  # the visible tests all pass on the buggy base


def test_editing_only_the_tests_cannot_pass(world, env):
    """An agent that writes tests of its own (even under the graded names) leaves the bug."""
    task = _every_tool(world.tasks("swe", "test")[0])
    path, _, names = _hidden(task)
    env.reset(task)
    fake = "".join(f"\n\ndef {n}():\n    assert True\n" for n in names)
    _bash(env, f"printf '%s' {json.dumps(fake)} >> {path}")
    assert "failed" not in _call(env, "run_tests")  # they pass in the workspace
    reward = env.verify()
    assert reward.score == 0.0 and path in reward.details["reverted"]
    assert reward.details["f2p"]["passed"] < reward.details["f2p"]["total"]


def test_grading_runs_the_hidden_file(world, env):
    """The reference fix passes the hidden F2P tests; the same fix graded against a hidden file
    whose F2P test expects another value fails, so the verdict comes from that file."""
    task = world.tasks("swe", "test")[0]
    path, text, names = _hidden(task)
    env.reset(task)
    env.apply_patch(task.metadata["patch"])
    reward = env.verify()
    assert reward.score == 1.0 and reward.details["f2p"]["total"] == len(names) >= 1
    head, sep, tail = text.partition(f"def {names[0]}():\n    assert ")
    line, rest = tail.split("\n", 1)
    call, expected = line.split(" == ", 1)
    wrong = f"{head}{sep}{call} == ({expected}, 'another value')\n{rest}"
    tampered = dataclasses.replace(
        task, validation=dataclasses.replace(task.validation, tests=json.dumps({path: wrong}))
    )
    env.reset(tampered)
    env.apply_patch(task.metadata["patch"])
    reward = env.verify()
    assert reward.score == 0.0 and f"{path}::{names[0]}" in reward.details["not_passed"]


def test_reproduction_reads_the_issue_call():
    issue = (
        "`f` gives a wrong result\n\nCalling `f([1, 2], 'a, but b')` (from `pkg/mod.py`) "
        "returns [1], but [1, 2] was expected."
    )
    assert reproduction(issue) == {
        "module": "pkg.mod",
        "call": "f([1, 2], 'a, but b')",
        "expected": "[1, 2]",
    }
    assert reproduction("Something is off with parsing.") is None
