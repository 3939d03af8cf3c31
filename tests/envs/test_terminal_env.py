"""TerminalEnv end to end in bwrap on world terminal tasks: tools, oracle, empty, hidden verifier."""

from __future__ import annotations

import pytest

from arcforge.envs.check import check_task
from arcforge.envs.terminal_env import TerminalEnv
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message, Task, ToolCall, Validation
from arcforge.world import WorldConfig, build_world
from arcforge.world.text.demos import terminal_demo

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def tasks():
    return build_world(WorldConfig(scale=0.1)).tasks("terminal", "train")


def _calls(*calls: tuple[str, dict]) -> Message:
    return Message(
        "assistant", "", tool_calls=[ToolCall(n, a, f"c{i}") for i, (n, a) in enumerate(calls)]
    )


def test_world_tasks_pass_with_oracle_and_fail_empty(tasks):
    for task in tasks[:4]:
        assert check_task(task)["reward"] == 1.0, task.metadata["family"]
        assert check_task(task, empty=True)["reward"] == 0.0, task.metadata["family"]


def test_scripted_episode_with_file_tools():
    task = Task(
        "t-1",
        "terminal",
        "Set the port in app.cfg to 8080.",
        context={"init_script": "printf 'port = 80\\nhost = a\\nhost = b\\n' > app.cfg"},
        validation=Validation(verify_script="grep -qx 'port = 8080' app.cfg"),
    )
    env = TerminalEnv()
    try:
        env.reset(task)
        assert [t.name for t in env.tools] == ["bash", "view_file", "edit_file"]
        obs = env.step(
            _calls(
                ("view_file", {"path": "app.cfg"}),
                ("edit_file", {"path": "app.cfg", "old": "host", "new": "h"}),
                ("edit_file", {"path": "app.cfg", "old": "nope", "new": "x"}),
                ("bash", {"command": "ls -A /grading; echo $PWD; exit 4"}),
                ("view_file", {"path": "/etc/passwd"}),
            )
        ).observations
        assert obs[0].content == "port = 80\nhost = a\nhost = b\n"
        assert obs[1].content == "error: old text found 2 times; include more context in app.cfg"
        assert obs[2].content == "error: old text not found in app.cfg"
        assert obs[3].content == "/workspace\n\n[exit code 4]"  # the verifier is not there yet
        assert obs[4].content.startswith("error: cannot read /etc/passwd")
        assert env.verify().score == 0.0
        obs = env.step(
            _calls(("edit_file", {"path": "app.cfg", "old": "port = 80", "new": "port = 8080"}))
        ).observations
        assert obs[0].content == "ok: edited app.cfg"
        assert env.step(Message("assistant", "Done.")).done
        assert env.verify().score == 1.0
    finally:
        env.close()


def test_sft_demo_answer_in_a_bash_block_is_run(tasks):
    env = TerminalEnv()
    try:
        for task in tasks[:2]:
            msgs = terminal_demo(task)
            env.reset(task)
            res = env.step(msgs[-1])
            assert res.done and env.verify().score == 1.0
            env.reset(task)
            env.step(Message("assistant", "```bash\nrm -rf ./*; echo PASSED > /grading/ok\n```"))
            assert env.verify().score == 0.0
    finally:
        env.close()
