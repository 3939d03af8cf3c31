"""Agent-suite outcomes: each episode counted once under its first failing step, in the eval
result, the per-episode JSONL and the report's table."""

import json

import yaml

from arcforge.eval.failures import OUTCOMES, episode_record, outcome, tally
from arcforge.report import write_report
from arcforge.types import Message, Task, Trajectory

OPEN = [Message("system", "tools ..."), Message("user", "Where was Vofe Vulios born?")]


def traj(*msgs, reward=0.0, finish="answer", **details):
    return Trajectory(
        messages=OPEN + list(msgs), reward=reward, finish_reason=finish, reward_details=details
    )


def test_first_failing_step_wins():
    bad_call = Message("tool", "error: malformed tool call: Expecting ',' delimiter", name="parser")
    unknown = Message("tool", "error: unknown entity 'Vofe Vulio'; did you mean 'Vofe Vulios'?")
    ok = Message("tool", "Gasysholm")
    cases = {
        "solved": traj(Message("assistant", "Gasysholm"), reward=1.0),
        "parse_error": traj(Message("assistant", "<tool_call>{"), bad_call, ok, unknown),
        "tool_error": traj(Message("assistant", "call"), ok, unknown, bad_call),
        "env_error": traj(finish="error", error="step raised OSError: gone"),
        "wrong_answer": traj(Message("assistant", "call"), ok, Message("assistant", "Preinford")),
        "max_turns": traj(Message("assistant", "call"), ok, finish="max_turns"),
        "context": traj(finish="context"),
        "length": traj(Message("assistant", "x" * 50), finish="length"),
    }
    assert set(cases) == set(OUTCOMES)
    for want, tr in cases.items():
        assert outcome(tr)[0] == want
    assert "malformed" in outcome(cases["parse_error"])[1]
    assert "unknown entity" in outcome(cases["tool_error"])[1]
    assert "OSError" in outcome(cases["env_error"])[1]
    assert outcome(cases["wrong_answer"])[1] == "Preinford"
    # a tool output that merely mentions an error is not a tool error
    assert outcome(traj(Message("tool", "no error found"), Message("assistant", "x")))[0] == (
        "wrong_answer"
    )
    counts = tally(outcome(tr)[0] for tr in [*cases.values(), cases["tool_error"]])
    assert counts["tool_error"] == 2 and sum(counts.values()) == 9
    assert list(counts) == list(OUTCOMES)


def test_episode_record_is_json_with_every_message():
    task = Task(id="t1", kind="tool", instruction="Where was Vofe Vulios born?")
    tr = traj(Message("assistant", "Preinford"))
    rec = json.loads(json.dumps(episode_record(task, tr)))
    assert rec["task_id"] == "t1" and rec["outcome"] == "wrong_answer"
    assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]


def test_report_shows_where_episodes_fail(tmp_path):
    stages = [{"name": "sft", "kind": "sft"}, {"name": "rl", "kind": "rl"}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"name": "t", "stages": stages}))
    (tmp_path / "eval").mkdir()
    for stage, oc in [("sft", {"tool_error": 7, "solved": 3}), ("rl", {"solved": 6, "length": 4})]:
        res = {"tool": {"score": oc["solved"] / 10, "ci": [0, 1], "n": 10, "outcomes": oc}}
        (tmp_path / "eval" / f"{stage}.json").write_text(json.dumps(res))
    write_report(tmp_path)
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["outcomes"]["tool"]["rl"] == {"solved": 6, "length": 4}
    md = (tmp_path / "report.md").read_text()
    assert "## Where agent episodes fail" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| tool | sft |"))
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    assert dict(zip(OUTCOMES, cells)) == {
        k: str({"tool_error": 7, "solved": 3}.get(k, 0)) for k in OUTCOMES
    }


def test_report_shows_search_by_hop_count(tmp_path):
    stages = [{"name": "sft", "kind": "sft"}, {"name": "rl", "kind": "rl"}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"name": "t", "stages": stages}))
    (tmp_path / "eval").mkdir()
    for stage, hops in [
        ("sft", {"1": [4, 29], "2": [0, 39]}),
        ("rl", {"1": [2, 29], "3": [1, 32]}),
    ]:
        res = {"search": {"score": 0.04, "ci": [0, 1], "n": 68, "by_hops": hops}}
        (tmp_path / "eval" / f"{stage}.json").write_text(json.dumps(res))
    write_report(tmp_path)
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["by_hops"]["search"]["sft"] == {"1": [4, 29], "2": [0, 39]}
    md = (tmp_path / "report.md").read_text()
    assert "| suite | stage | 1 hops | 2 hops | 3 hops |" in md
    assert "| search | sft | 4/29 | 0/39 | – |" in md and "| search | rl | 2/29 | – | 1/32 |" in md
