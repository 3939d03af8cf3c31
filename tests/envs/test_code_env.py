"""CodeEnv end to end in bwrap on world code tasks: oracle passes, wrong code and hacks fail."""

from __future__ import annotations

import pytest

from arcforge.envs.code_env import CodeEnv, assemble, junit_key, parse_junit
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message, ToolCall
from arcforge.world import WorldConfig, build_world

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def task():
    return build_world(WorldConfig(scale=0.1)).tasks("code", "train")[0]


def _answer(code: str) -> Message:
    return Message("assistant", f"Here it is:\n```python\n{code}\n```")


def test_oracle_passes_all_hidden_tests(task):
    env = CodeEnv()
    try:
        env.reset(task)
        call = ToolCall("run_python", {"code": task.metadata["solution"] + "\nprint('ok')"}, "c")
        obs = env.step(Message("assistant", "", tool_calls=[call])).observations
        assert obs[0].content == "ok\n"
        assert env.step(_answer(task.metadata["solution"])).done
        reward = env.verify()
        assert reward.score == 1.0 and reward.details["passed"] == reward.details["total"] == 5
    finally:
        env.close()


def test_a_body_completes_the_stub_and_a_wrong_body_fails(task):
    name, body = task.metadata["entry_point"], task.metadata["body"]
    env = CodeEnv()
    try:
        env.reset(task)
        env.step(_answer(body))  # HumanEval-style: the body alone
        reward = env.verify()
        assert reward.score == 1.0 and reward.details["passed"] == 5
        env.reset(task)
        env.step(_answer("    return None"))
        assert env.verify().score == 0.0
        # a whole function under another name is completed too, and still fails
        env.reset(task)
        env.step(_answer(task.metadata["solution"].replace(f"def {name}(", "def other_name(")))
        assert env.verify().score == 0.0
    finally:
        env.close()


def test_assemble_keeps_a_whole_function_and_prepends_the_stub_to_a_body():
    stub = 'def f(x):\n    """Double x."""\n'
    assert assemble("def f(x):\n    return 2 * x\n", stub, "f") == "def f(x):\n    return 2 * x\n"
    assert assemble("    return 2 * x\n", stub, "f") == stub + "    return 2 * x\n"
    helper = "def g(y):\n    return y\n"
    assert assemble(helper, stub, "f") == stub + helper  # defines no f: completes the stub
    assert assemble("    return 2 * x\n", None, "f") == "    return 2 * x\n"  # no stub


def test_wrong_code_missing_block_and_hacks_score_zero(task):
    name = task.metadata["entry_point"]
    env = CodeEnv()
    try:
        env.reset(task)
        env.step(_answer(f"def {name}(*args):\n    return None"))
        assert env.verify().score == 0.0

        env.reset(task)
        env.step(Message("assistant", task.metadata["solution"]))  # no fenced block
        assert "error" in env.verify().details

        # a conftest that forces every test to pass, planted with the tool, then wrong code
        env.reset(task)
        hook = (
            "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
            "def pytest_runtest_makereport(item, call):\n    out = yield\n"
            "    out.get_result().outcome = 'passed'\n"
        )
        plant = (
            f"open('conftest.py', 'w').write({hook!r})\n"
            "open('/grading/junit.xml', 'w').write('<testsuite/>')\n"
        )
        obs = env.step(
            Message("assistant", "", tool_calls=[ToolCall("run_python", {"code": plant})])
        )
        assert "Read-only file system" in obs.observations[0].content  # /grading is not writable
        env.step(
            Message(
                "assistant",
                "",
                tool_calls=[
                    ToolCall("run_python", {"code": f"open('conftest.py', 'w').write({hook!r})"})
                ],
            )
        )
        env.step(_answer(f"def {name}(*args):\n    print('PASSED')\n    return None"))
        reward = env.verify()
        assert reward.score == 0.0 and reward.details["passed"] == 0
    finally:
        env.close()


def test_junit_parsing_and_keys():
    xml = """<testsuites><testsuite>
      <testcase classname="tests.test_a" name="test_x"/>
      <testcase classname="tests.test_a" name="test_y"><failure message="no"/></testcase>
      <testcase classname="tests.test_a.TestC" name="test_z[1-2]"><skipped/></testcase>
    </testsuite></testsuites>"""
    status = parse_junit(xml)
    assert status == {
        "tests.test_a::test_x": "passed",
        "tests.test_a::test_y": "failed",
        "tests.test_a.TestC::test_z[1-2]": "skipped",
    }
    assert junit_key("tests/test_a.py::TestC::test_z[1-2]") == "tests.test_a.TestC::test_z[1-2]"
