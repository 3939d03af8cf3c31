"""Mid-training how-to documents: from TRAIN tasks only, and each one's command or program
really does what its task asks (run for real)."""

import re
import subprocess
import sys

import pytest

from arcforge.errors import ConfigError
from arcforge.stages.world_source import world_records
from arcforge.world.text.agent_docs import agent_docs

_BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.DOTALL)


def test_docs_hold_no_held_out_instruction(world):
    text = "\n".join(t for _, t in agent_docs(world))
    for t in world.tasks("terminal", "test") + world.tasks("reasoning", "test"):
        assert t.instruction not in text
    n_terminal = len(world.tasks("terminal", "train"))
    assert len(agent_docs(world, ("terminal",))) == n_terminal > 0


def test_a_terminal_doc_solves_its_task(world, tmp_path):
    task = world.tasks("terminal", "train")[0]
    doc = dict(agent_docs(world, ("terminal",)))[f"howto-{task.id}"]
    assert task.instruction in doc
    ((lang, cmd),) = _BLOCK.findall(doc)
    assert lang == "bash"
    run = lambda s: subprocess.run(["bash", "-c", s], cwd=tmp_path, capture_output=True)  # noqa: E731
    assert run(task.context["init_script"]).returncode == 0
    assert run(cmd).returncode == 0 and run(task.validation.verify_script).returncode == 0


def test_a_tir_doc_program_prints_the_answer(world):
    task = world.tasks("reasoning", "train")[3]
    doc = dict(agent_docs(world, ("tir",)))[f"howto-{task.id}"]
    ((lang, code),) = _BLOCK.findall(doc)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert lang == "python" and out.strip() == str(task.validation.answer)
    assert doc.rstrip().endswith(f"Answer: {task.validation.answer}")


def test_agent_docs_source_errors_name_the_problem(world):
    recs = world_records(world, "agent_docs/tir", None)
    assert len(recs) == len(world.tasks("reasoning", "train")) and recs[0].text.startswith(
        "Problem:"
    )
    with pytest.raises(ConfigError, match="unknown agent_docs kind"):
        world_records(world, "agent_docs/slides", None)
    with pytest.raises(ConfigError, match="train tasks only"):
        world_records(world, "agent_docs", "test")
