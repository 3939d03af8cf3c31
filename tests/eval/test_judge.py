"""Agent-as-a-judge: project detection and BSR, then a replay judge whose tool calls really run
in Chromium, failing a generated web app with a planted logic bug and passing the fixed one."""

from __future__ import annotations

import json
import re
import sys

import pytest

from arcforge.browser import browser_missing
from arcforge.errors import UserError
from arcforge.eval.judge import JudgeTools, judge_check, judge_project, load_checks
from arcforge.eval.webproject import RunningProject, build_success_rate, detect_project
from arcforge.llm import LLMClient
from arcforge.replay import ReplayServer
from arcforge.world.code.webapps import write_webapp

needs_browser = pytest.mark.skipif(
    browser_missing() is not None, reason=f"needs a browser: {browser_missing()}"
)


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def scripted_judge(messages: list[dict]) -> str:
    """A stand-in for an LLM judge: one turn with its test plan (several tool calls in one
    reply), then a verdict read from what the tools observed in the real browser; it never
    sees whether the app is buggy."""
    task = messages[1]["content"]
    if m := re.search(r"Type (\d+) into the first field and (\d+)", task):
        a, b = m.groups()
        plan = [
            call("navigate", path="/"),
            call("read", path="app.js"),
            call("type", selector="#a", text=a),
            call("type", selector="#b", text=b),
            call("click", selector="#add"),
        ]
        want, pattern = str(int(a) + int(b)), r"Result: (\S+)"
    else:
        m = re.search(r"Click the '(.+?)' button (\d+) times: the count shows (\d+)", task)
        plan = [call("navigate", path="/")] + [call("click", selector="#inc")] * int(m.group(2))
        want, pattern = m.group(3), r"Clicks: (\S+)"
    if len(messages) == 2:
        return "I will open the app and try it. " + "".join(plan)
    shown = re.findall(pattern, messages[-1]["content"])  # the state after the last action
    got = shown[-1] if shown else "nothing"
    if got == want:
        return call("finish", verdict="PASS", reason=f"the page shows {got} as required")
    return call(
        "finish",
        verdict="FAIL",
        reason=f"critical logic error: the page shows {got}, expected {want}",
    )


def test_detect_project_types(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "dist").mkdir()
    (tmp_path / "s" / "dist" / "index.html").write_text("<p>x</p>")
    assert detect_project(tmp_path / "s").kind == "static"
    py = write_webapp(tmp_path / "py", "counter")
    spec = detect_project(py)
    assert spec.kind == "python" and spec.start == [sys.executable, "app.py"]
    assert spec.build[0][:3] == [sys.executable, "-m", "py_compile"]
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "package.json").write_text('{"scripts": {"build": "x", "dev": "y"}}')
    spec = detect_project(tmp_path / "n")
    assert spec.kind == "node" and spec.build == [["npm", "run", "build"]]
    assert spec.start == ["npm", "run", "dev"]
    (tmp_path / "e").mkdir()
    assert detect_project(tmp_path / "e").kind == "unknown"


def test_load_checks_accepts_strings_and_names_bad_files(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('["the page loads", {"id": "k", "check": "button works"}]')
    query, items = load_checks(p)
    assert query == "" and [(c.id, c.check) for c in items] == [
        ("check-1", "the page loads"),
        ("k", "button works"),
    ]
    p.write_text('{"checks": [3]}')
    with pytest.raises(UserError, match="item 0 must be a string"):
        load_checks(p)
    with pytest.raises(UserError, match="does not exist"):
        load_checks(tmp_path / "missing.json")


def test_build_failure_fails_every_check_and_lowers_bsr(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "app.py").write_text("def broken(:\n")
    (bad / "checks.json").write_text('["the app starts"]')
    with ReplayServer([]) as srv:  # the judge is never asked: the build failed
        report = judge_project(bad, LLMClient(srv.base_url, "replay"))
        assert srv.requests == []
    assert not report.launch.built and report.verdicts[0].verdict == "FAIL"
    assert report.verdicts[0].reason.startswith("build failed")
    assert "SyntaxError" in " ".join(report.launch.log)
    good = write_webapp(tmp_path / "good", "adder")
    with RunningProject(good) as app:
        assert app.result.ok and app.result.base_url.startswith("http://127.0.0.1:")
    assert build_success_rate([report.launch, app.result]) == 0.5


@needs_browser
def test_judge_fails_the_planted_bug_and_passes_the_fix(tmp_path):
    with ReplayServer(scripted_judge) as srv:
        client = LLMClient(srv.base_url, "replay")
        buggy = judge_project(write_webapp(tmp_path / "bug", "adder", buggy=True, seed=1), client)
        fixed = judge_project(write_webapp(tmp_path / "fix", "adder", buggy=False, seed=1), client)
    (v,) = buggy.verdicts
    assert buggy.launch.kind == "static" and buggy.launch.ok
    assert v.verdict == "FAIL" and v.decided and v.turns == 2
    # the reason carries what Chromium showed: string concatenation, e.g. "3"+"4" -> 34
    a, b = re.search(r"Type (\d+) into the first field and (\d+)", v.check).groups()
    assert f"shows {a}{b}, expected {int(a) + int(b)}" in v.reason
    assert "Number(a)" not in json.dumps(v.transcript) and "a + b" in json.dumps(v.transcript)
    assert fixed.verdicts[0].verdict == "PASS" and fixed.pass_rate == 1.0


@needs_browser
def test_judge_on_a_python_app_through_the_cli(tmp_path, monkeypatch):
    from arcforge.cli import main

    apps = [write_webapp(tmp_path / "c1", "counter", buggy=True)]
    with ReplayServer(scripted_judge) as srv:
        monkeypatch.setattr(
            sys,
            "argv",
            [
                "arcforge",
                "eval",
                "judge",
                *map(str, apps),
                "--base-url",
                srv.base_url,
                "--model",
                "replay",
                "--out",
                str(tmp_path / "out"),
            ],
        )
        with pytest.raises(SystemExit) as exit_:
            main()
    assert exit_.value.code in (0, None)
    summary = json.loads((tmp_path / "out" / "judge.json").read_text())
    assert summary["bsr"] == 1.0
    verdicts = [p["verdicts"][0] for p in summary["projects"]]
    assert [p["launch"]["kind"] for p in summary["projects"]] == ["python"]
    assert [v["verdict"] for v in verdicts] == ["FAIL"]
    shown, want = re.search(r"shows (\d+), expected (\d+)", verdicts[0]["reason"]).groups()
    assert int(shown) == 2 * int(want)  # the server adds 2 per click


@needs_browser
def test_malformed_calls_undecided_judges_and_native_tool_calls(tmp_path):
    from arcforge.browser import run_in_browser

    replies = [
        '<tool_call>{"name": "navigate", "arguments": </tool_call>',
        call("click", selector="#nope"),
        call("navigate", path="/"),
    ]
    with RunningProject(write_webapp(tmp_path / "a", "adder")) as app:
        _, items = load_checks(app.root / "checks.json")

        def judge(browser, base_url, native):
            with browser.fresh_page() as page:
                jt = JudgeTools(page, app.result.base_url, app.root, tmp_path)
                client = LLMClient(base_url, "replay")
                return judge_check(client, jt, items[0], max_turns=3, native_tools=native)

        with ReplayServer(replies) as srv:
            v = run_in_browser(lambda b: judge(b, srv.base_url, False))
        with ReplayServer(scripted_judge) as native_srv:
            nv = run_in_browser(lambda b: judge(b, native_srv.base_url, True))
    assert v.verdict == "FAIL" and not v.decided and v.reason.startswith("undecided")
    observations = [m["content"] for m in v.transcript if m["role"] == "user"][1:]
    assert "error: malformed tool call: tool call 1: invalid JSON" in observations[0]
    assert "error: click raised" in observations[1]
    assert "title: " in observations[2] and "#add button" in observations[2]
    # native mode: schemas go in `tools`, results come back as OpenAI tool messages
    assert nv.verdict == "PASS" and nv.turns == 2
    first, second = native_srv.requests[0], native_srv.requests[1]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["navigate", "click", "type", "screenshot", "read", "list_files", "finish"]
    finish = first["tools"][-1]["function"]["parameters"]["properties"]["verdict"]
    assert finish["enum"] == ["PASS", "FAIL"]
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 5 and all(m["tool_call_id"] for m in tool_msgs)
    assert second["messages"][2]["tool_calls"][0]["function"]["name"] == "navigate"
