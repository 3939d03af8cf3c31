"""Terminal synthesis end to end against the ReplayServer (a scripted LLM over real HTTP):
seed expansion, the web-page route, the construction agent with one self-repair round, and
refine (stability + an exploit probe) in the sandbox; rerun resumes without calling the LLM."""

from __future__ import annotations

import json

import pytest

from arcforge.envs.importers import import_harbor
from arcforge.llm import LLMClient
from arcforge.replay import ReplayServer
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.synth.terminal import TerminalSynthConfig, page_is_tutorial, synthesize_terminal

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")

SEED = "Count the lines of /app/logs/app.log and write the number to /app/count.txt."
DRAFTS = [
    {"title": "Count lines", "instruction": SEED},
    {"title": "Uppercase", "instruction": "Uppercase /app/in.txt into /app/out.txt."},
]
SPECS = {
    "Count lines": {
        "instruction": SEED,
        "init": "mkdir -p /app/logs && printf 'a\\nb\\nc\\n' > /app/logs/app.log",
        "solution": "wc -l < /app/logs/app.log > /app/count.txt",
        "check": '[ "$(cat /app/count.txt)" = "$(wc -l < /app/logs/app.log)" ]',
    },
    "Uppercase": {  # first try writes the wrong file; the repair fixes it
        "instruction": "Uppercase /app/in.txt into /app/out.txt.",
        "init": "printf 'hello world\\n' > /app/in.txt",
        "solution": "tr a-z A-Z < /app/in.txt > /app/wrong.txt",
        "check": "diff -q /app/out.txt /tests/expected.txt",
        "test_files": {"expected.txt": "HELLO WORLD\n"},
    },
    "Sum numbers": {  # the check trusts a script in the agent's workspace: refine rejects it
        "instruction": "Sum the numbers in /app/nums.txt into /app/sum.txt.",
        "init": "printf '1\\n2\\n3\\n' > /app/nums.txt && "
        "printf '[ \"$(cat /app/sum.txt)\" = 6 ]\\n' > /app/check_sum.sh",
        "solution": "awk '{s+=$1} END {print s}' /app/nums.txt > /app/sum.txt",
        "check": "bash /app/check_sum.sh",
    },
}
TUTORIAL = """# Summing a column with awk
1. Look at the file:
```
cat nums.txt
```
2. Sum it:
```
awk '{s+=$1} END {print s}' nums.txt
```
3. Save the result:
```
awk '{s+=$1} END {print s}' nums.txt > sum.txt
```
"""
PAGES = [
    {"url": "https://example.org/awk-sum", "title": "Summing with awk", "text": TUTORIAL},
    {"url": "https://example.org/news", "title": "News", "text": "No code here. 1. a 2. b"},
]


def scripted_llm(messages: list[dict]) -> str:
    """Answers each kind of synthesis prompt like a (cooperative) model would."""
    first, last = messages[0]["content"], messages[-1]["content"]
    if "Write 2 new tasks" in first:
        return "<think>two variants</think>\n```json\n" + json.dumps(DRAFTS) + "\n```"
    if "technical web page" in first:
        return json.dumps({"title": "Sum numbers", "instruction": "Sum /app/nums.txt."})
    title = first.split("Title: ", 1)[1].split("\n", 1)[0]
    spec = dict(SPECS[title])
    if title == "Uppercase" and last.startswith("Your task did not validate"):
        assert "does not pass the check" in last  # the oracle's failure was fed back
        spec["solution"] = "tr a-z A-Z < /app/in.txt > /app/out.txt"
    return json.dumps(spec)


def test_seed_and_page_routes_end_to_end(tmp_path):
    with ReplayServer(scripted_llm) as srv:
        cfg = TerminalSynthConfig(
            llm=LLMClient(srv.base_url, "replay"),
            n_variants=2,
            runs=1,
            probes=["modify_verifier"],
            repair_rounds=2,
        )
        out = synthesize_terminal(tmp_path, cfg, seeds=[SEED], pages=PAGES)
        n_requests = len(srv.requests)
        assert sorted(r.data["title"] for r in out) == ["Count lines", "Uppercase"]
        rounds = {r.data["title"]: r.data["repair_rounds"] for r in out}
        assert rounds == {"Count lines": 0, "Uppercase": 1}
        summary = {
            s["step"]: s for s in json.loads((tmp_path / "summary.json").read_text())["steps"]
        }
        assert (summary["draft"]["in"], summary["draft"]["out"]) == (3, 3)
        assert summary["draft"]["dropped"] == {"not a tutorial page": 1}
        assert summary["construct"]["out"] == 3
        assert summary["refine"]["dropped"] == {"exploitable: modify_verifier": 1}
        # the accepted directories are Harbor tasks the importer reads back, init.sh included
        task = import_harbor(out[0].data["task_dir"])
        assert "mkdir -p /workspace/logs" in task.context["init_script"]
        assert task.metadata["reward_file"] and "check.sh" in task.metadata["test_files"]
        assert out[0].provenance[0]["step"] == "draft"
        # a rerun resumes from the journals: no LLM call, same tasks
        again = synthesize_terminal(tmp_path, cfg, seeds=[SEED], pages=PAGES)
        assert len(srv.requests) == n_requests
        assert [r.id for r in again] == [r.id for r in out]


def test_self_repair_gives_up_after_k_rounds(tmp_path):
    def stubborn(messages: list[dict]) -> str:
        if "Write 1 new tasks" in messages[0]["content"]:
            return json.dumps([DRAFTS[1]])
        return json.dumps(SPECS["Uppercase"])  # never fixed

    with ReplayServer(stubborn) as srv:
        cfg = TerminalSynthConfig(
            llm=LLMClient(srv.base_url, "replay"), n_variants=1, repair_rounds=1, runs=1, probes=[]
        )
        assert synthesize_terminal(tmp_path, cfg, seeds=["x"]) == []
        assert len(srv.requests) == 3  # expansion + first try + one repair
    journal = [json.loads(x) for x in (tmp_path / "construct.jsonl").read_text().splitlines()]
    assert journal[0]["dropped"] == "self-repair exhausted"
    assert not (tmp_path / "tasks" / "seed000_0").exists()


def test_page_filter():
    assert page_is_tutorial(TUTORIAL)
    assert not page_is_tutorial("1. do this\n2. do that\n```\nonly one block\n```")
    html = "<ol><li>a</li><li>b</li></ol>" + "<pre>x</pre>" * 3
    assert page_is_tutorial(html)
