"""The "mcp" environment kind over published MCP servers started by the test: PyPI's
`mcp-server-time` (the `mcp` extra installs it) and npm's `@modelcontextprotocol/server-memory`
(installed with npm into a cache directory; skipped, saying so, only when npm cannot reach the
registry). Tools are listed and called through the `mcp` SDK; a tool the server rejects, a
server that does not start and a call to an unknown tool come back as `error:` observations.
ABE-synthesised tools served by `arcforge env serve-mcp` answer through the SDK exactly as the
abe environment's local functions do, and the expert solves the tasks through the agent loop.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the `mcp` extra is not installed")

from arcforge.envs.abe_env import ABEEnv  # noqa: E402
from arcforge.envs.mcp_env import McpClient, MCPEnv, McpError, open_server  # noqa: E402
from arcforge.envs.registry import env_factory, make_env  # noqa: E402
from arcforge.rollout.agent import AgentConfig, run_episodes  # noqa: E402
from arcforge.rollout.policies import ScriptedEngine  # noqa: E402
from arcforge.synth.abe_tools import abe_expert, synthesize_abe  # noqa: E402
from arcforge.synth.wkg import build_graph  # noqa: E402
from arcforge.types import Message, Task, ToolCall, Validation  # noqa: E402

TIME_SERVER = [str(Path(sys.executable).parent / "mcp-server-time"), "--local-timezone", "UTC"]
MEMORY_PKG = "@modelcontextprotocol/server-memory"
NPM_DIR = Path(os.environ.get("ARCFORGE_NPM_CACHE", Path.home() / ".cache/arcforge/npm-mcp"))


def _call(name: str, i: int = 0, **arguments) -> ToolCall:
    return ToolCall(name, arguments, id=f"c{i}")


def _assistant(*calls: ToolCall) -> Message:
    return Message("assistant", "", tool_calls=list(calls))


def test_time_server_tools_are_listed_and_called_through_the_sdk():
    task = Task(
        "time-1",
        "mcp",
        "It is 12:00 UTC. What time is it in Tokyo?",
        context={"mcp": {"command": TIME_SERVER}},
        validation=Validation(answer="21:00"),
    )
    env = make_env(task)  # the registered kind
    assert isinstance(env, MCPEnv)
    try:
        env.reset(task)
        by_name = {t.name: t for t in env.tools}
        assert set(by_name) == {"get_current_time", "convert_time"}
        props = by_name["convert_time"].parameters["properties"]
        assert {"source_timezone", "time", "target_timezone"} <= set(props)
        step = env.step(
            _assistant(
                _call(
                    "convert_time",
                    0,
                    source_timezone="UTC",
                    time="12:00",
                    target_timezone="Asia/Tokyo",
                ),
                _call("get_current_time", 1, timezone="Not/AZone"),  # the server rejects it
                _call("convert_time", 2, time="12:00"),  # missing arguments: our schema check
                _call("no_such_tool", 3),
            )
        )
        obs = [o.content for o in step.observations]
        converted = json.loads(obs[0])
        assert converted["target"]["datetime"].endswith("T21:00:00+09:00")
        assert obs[1].startswith("error:") and "Not/AZone" in obs[1]
        assert obs[2].startswith("error:") and "source_timezone" in obs[2]
        assert obs[3].startswith("error: unknown tool 'no_such_tool'")
        assert not step.done
        env.step(Message("assistant", "Answer: 21:00"))
        r = env.verify()
        assert r.score == 1.0 and r.details["n_tool_calls"] == 4 and r.details["n_errors"] == 3
    finally:
        env.close()
    # the same episode answering wrong scores 0
    env = MCPEnv(server={"command": TIME_SERVER})
    try:
        env.reset(Task("time-2", "mcp", "?", validation=Validation(answer="21:00")))
        env.step(Message("assistant", "Answer: 20:00"))
        assert env.verify().score == 0.0
    finally:
        env.close()


def test_a_server_that_does_not_start_is_an_observation_not_a_crash(tmp_path):
    with pytest.raises(McpError, match="failed to start: .*its stderr ends: boom"):
        McpClient([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])
    env = MCPEnv(server={"command": [str(tmp_path / "missing-server")]}, start_timeout=10)
    task = Task("x", "mcp", "q", validation=Validation(answer="1"))
    try:
        assert env.reset(task)[-1].content == "q" and env.tools == []
        step = env.step(_assistant(_call("anything")))
        assert step.observations[0].content.startswith("error: MCP server")
        assert "missing-server" in step.observations[0].content and not step.done
        env.step(Message("assistant", "Answer: 1"))
        r = env.verify()
        assert r.score == 0.0 and "failed to start" in r.details["error"]
    finally:
        env.close()
    with pytest.raises(ValueError, match="exactly one of command or url"):
        open_server({"cmd": ["x"]})


def _memory_server() -> list[str]:
    """argv of npm's memory server, installed into NPM_DIR on first use."""
    entry = NPM_DIR / "node_modules" / MEMORY_PKG / "dist" / "index.js"
    if not entry.is_file():
        if shutil.which("npm") is None or shutil.which("node") is None:
            pytest.skip("node/npm are not installed")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(NPM_DIR), MEMORY_PKG],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if res.returncode != 0:
            tail = (res.stderr or res.stdout)[-400:]
            if any(s in tail for s in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT")):
                pytest.skip(f"npm cannot reach the registry: {tail}")
            raise AssertionError(f"npm install {MEMORY_PKG} failed: {tail}")
    return [shutil.which("node") or "node", str(entry)]


def test_npm_memory_server_state_is_checked_and_each_episode_starts_empty():
    server = {
        "command": _memory_server(),
        "env": {"MEMORY_FILE_PATH": "{episode_dir}/memory.jsonl"},
    }
    task = Task(
        "mem-1",
        "mcp",
        "Remember that Ada Lovelace wrote the first program.",
        context={"mcp": server},
        validation=Validation(
            constraints=[
                {
                    "type": "mcp_call",
                    "tool": "read_graph",
                    "arguments": {},
                    "contains": "first program",
                }
            ]
        ),
    )
    entity = {
        "name": "Ada Lovelace",
        "entityType": "person",
        "observations": ["wrote the first program"],
    }
    env = MCPEnv()
    try:
        env.reset(task)
        assert {"create_entities", "read_graph", "search_nodes"} <= {t.name for t in env.tools}
        step = env.step(_assistant(_call("create_entities", 0, entities=[entity])))
        assert "Ada Lovelace" in step.observations[0].content
        env.step(Message("assistant", "Done."))
        r = env.verify()
        assert r.score == 1.0, r.details
        # a new episode gets a fresh server and memory file: doing nothing fails the check
        env.reset(task)
        env.step(Message("assistant", "Done."))
        r = env.verify()
        assert r.score == 0.0 and r.details["state_checks"][0]["ok"] is False
    finally:
        env.close()


def _served(t: Task, path: Path) -> Task:
    """An ABE task as an mcp task whose server is `arcforge env serve-mcp` on its tools."""
    cmd = [sys.executable, "-m", "arcforge.cli", "env", "serve-mcp", str(path), "--task", t.id]
    return Task(
        t.id,
        "mcp",
        t.instruction,
        context={"mcp": {"command": cmd}},
        validation=Validation(answer=t.validation.answer),
        metadata=t.metadata,
    )


def test_abe_tools_served_over_mcp_answer_as_the_abe_env_does(world, tmp_path):
    tasks, _ = synthesize_abe(4, seed=3, graph=build_graph(world.pages))
    path = tmp_path / "abe.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    # the same schemas, the same answers (and the same error) as the local functions
    t = tasks[0]
    s = _served(t, path)
    local, remote = ABEEnv(), MCPEnv()
    try:
        local.reset(t)
        remote.reset(s)
        assert [x.schema() for x in remote.tools] == [x.schema() for x in local.tools]
        calls = [c for turn in abe_expert(t)[:-1] for c in turn.tool_calls]
        calls.append(ToolCall(calls[0].name, {**calls[0].arguments, "zzz": 1}, "bad"))
        for c in calls:
            msg = _assistant(c)
            a, b = local.step(msg).observations[0], remote.step(msg).observations[0]
            assert a.content == b.content
    finally:
        remote.close()


@pytest.mark.slow  # each episode starts `arcforge env serve-mcp`: ~4 s, 10-20 s under load
def test_abe_expert_solves_the_tasks_over_mcp_through_the_agent_loop(world, tok, tmp_path):
    tasks, _ = synthesize_abe(4, seed=3, graph=build_graph(world.pages))
    path = tmp_path / "abe.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    served = [_served(t, path) for t in tasks[-2:]]
    engine = ScriptedEngine(tok, {x.instruction: abe_expert(x) for x in tasks})
    cfg = AgentConfig(max_turns=6, max_new_tokens=400, context_budget=8192)
    trajs = run_episodes(engine, tok, lambda x: make_env(x), served, cfg)
    assert [tr.reward for tr in trajs] == [1.0, 1.0], [tr.reward_details for tr in trajs]
    assert all(tr.reward_details["n_errors"] == 0 for tr in trajs)


def test_url_servers_over_streamable_http(tok):
    """An ABE spec served in-process by the SDK's streamable-HTTP app, reached by URL, also
    through the agent loop (the path SFT episodes, agentic RL and eval take)."""
    import socket
    import threading
    import time

    import uvicorn

    from arcforge.envs.mcp_env import abe_server

    params = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    spec = {
        "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}],
        "records": [{"tool": "f", "arguments": {"x": "A"}, "result": "42"}],
    }
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    app = abe_server(spec).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        task = Task("u", "mcp", "What is f(A)?", validation=Validation(answer="42"))
        env = MCPEnv(server={"url": f"http://127.0.0.1:{port}/mcp"})
        try:
            env.reset(task)
            obs = env.step(_assistant(_call("f", 0, x="a"), _call("f", 1, x="B"))).observations
            assert obs[0].content == "42" and obs[1].content.startswith("error: no record")
            env.step(Message("assistant", "Answer: 42"))
            assert env.verify().score == 1.0
        finally:
            env.close()
        script = [_assistant(_call("f", 0, x="A")), Message("assistant", "Answer: 42")]
        engine = ScriptedEngine(tok, {task.instruction: script})
        cfg = AgentConfig(max_turns=4, max_new_tokens=200, context_budget=4096)
        url = {"server": {"url": f"http://127.0.0.1:{port}/mcp"}}
        (tr,) = run_episodes(engine, tok, env_factory(None, mcp=url), [task], cfg)
        assert tr.reward == 1.0 and tr.reward_details["n_tool_calls"] == 1, tr.reward_details
    finally:
        server.should_exit = True
        thread.join(timeout=10)
