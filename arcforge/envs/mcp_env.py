"""MCPEnv: tools from any MCP server (a stdio command or a streamable-HTTP URL), and ABE tool
sets served as an MCP server.

`McpClient` holds one live session with a server through PyPI's `mcp` SDK, from synchronous
code: the SDK is asyncio/anyio-only and its transports are context managers that must be entered
and left in one task, so one daemon thread runs an event loop with a single task that opens the
transport and session, lists the tools, then serves `call_tool` requests from a queue until
`close`. `tools()` gives arcforge `Tool`s (the server's `inputSchema` as the parameters, each
bound to a call on the server) that any environment can offer.

`MCPEnv` (task kind "mcp") is an `Env`: one server per episode (a stdio server is
started by `reset` in a fresh temporary directory, `{episode_dir}` in its command, env or cwd,
and stopped by `close`), the model calls the server's tools until it replies without a call.
The server comes from `task.context["mcp"]` or, for every task, the `server=` option (a task's
own wins): `{"command": [argv...], "env": {...}, "cwd": ...}` or `{"url": "http://.../mcp"}`;
`task.tools`, when given, narrows the listed tools to those names. The reward is 1 when every
check holds, else 0: `validation.answer` (the reply's "Answer: ..." part, compared as
normalized parts, as ABE compares) and each `validation.constraints` entry of type `mcp_call`,
`{"type": "mcp_call", "tool", "arguments", "contains": str}`, a call made on the live server
after the episode whose text must contain `contains` (the end-state check of a stateful server,
e.g. the memory server's `read_graph`). A server that fails to start, a call that times out or
a call the server rejects (`isError`, a protocol error) becomes an `error: ...` observation; a
server that never started leaves the episode running without tools and scores 0.

`abe_server(spec)` is an MCP `Server` (the SDK's low-level one, since ABE tools have schemas
only known at run time) answering from an ABE spec's deployed tools; `serve_abe_stdio(spec)`
runs it on stdin/stdout (`arcforge env serve-mcp TASKS.jsonl --task ID`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from arcforge.envs.abe_env import answers_match, deploy_tools
from arcforge.envs.base import Env, execute_call
from arcforge.rewards.math import extract_answer
from arcforge.types import Message, Reward, Task, Tool, ToolCall

EPISODE_DIR = "{episode_dir}"


class McpError(RuntimeError):
    """The server could not be started or reached; the message says why."""


def _text_of(result: Any) -> tuple[str, bool]:
    """A CallToolResult as (text, is_error): text blocks joined, other blocks named."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[resource {res.uri}]")
        else:
            parts.append(f"[{kind} content]")
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if not parts and structured is not None:
        import json

        parts.append(json.dumps(structured))
    is_error = bool(getattr(result, "is_error", getattr(result, "isError", False)))
    return "\n".join(parts), is_error


def _schema_of(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}
    return dict(schema) or {"type": "object", "properties": {}}


class McpClient:
    """One session with an MCP server, usable from synchronous code (see the module docstring).

    Args:
        command: argv of a stdio server (a string is split on whitespace).
        url: a streamable-HTTP endpoint instead of a command.
        env: extra environment variables for a stdio server.
        cwd: its working directory.
        start_timeout: seconds to start, initialize and list tools.
        call_timeout: seconds per tool call.
    Raises:
        McpError: the server did not start, initialize or list its tools in time; the message
            carries the tail of its stderr.
    """

    def __init__(
        self,
        command: list[str] | str | None = None,
        url: str | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        start_timeout: float = 60,
        call_timeout: float = 30,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("an MCP server needs exactly one of command= or url=")
        if isinstance(command, str):
            command = command.split()
        if command is not None and not command:
            raise ValueError("an MCP server command must not be empty")
        self.command, self.url, self.env, self.cwd = command, url, env, cwd
        self.start_timeout, self.call_timeout = start_timeout, call_timeout
        self.listed: list[Any] = []
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="mcp-client")
        self._thread.start()
        if not self._ready.wait(start_timeout + 10) or self._error is not None:
            err = self._error
            late = err is None or isinstance(err, (TimeoutError, asyncio.CancelledError))
            why = f"no answer in {start_timeout:g}s" if late else _why(err)
            tail = self._tail()
            self.close()
            raise McpError(f"MCP server {self.describe()} failed to start: {why}{tail}")

    def describe(self) -> str:
        return self.url if self.url else " ".join(self.command or [])

    def _tail(self, n: int = 600) -> str:
        try:
            self._errlog.seek(0)
            text = self._errlog.read().strip()
        except (OSError, ValueError):
            return ""
        return f"; its stderr ends: {text[-n:]}" if text else ""

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as err:  # noqa: BLE001 - reported to the caller, never raised here
            self._error = self._error or err
        finally:
            self._ready.set()

    async def _open(self, stack: AsyncExitStack) -> Any:
        try:
            from mcp import ClientSession
        except ImportError:
            raise McpError(
                "the `mcp` extra is not installed (pip install 'arcforge[mcp]')"
            ) from None

        if self.url:
            from mcp.client.streamable_http import streamable_http_client

            streams = await stack.enter_async_context(streamable_http_client(self.url))
        else:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            assert self.command is not None
            exe = shutil.which(self.command[0]) or self.command[0]
            params = StdioServerParameters(
                command=exe, args=list(self.command[1:]), env=self.env, cwd=self.cwd
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=self._errlog))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        import anyio

        # only the requests are timed: the transport and session scopes above are left by the
        # exit stack, outside any cancel scope opened here
        listed, cursor = [], None
        with anyio.fail_after(self.start_timeout):
            await session.initialize()
            for _ in range(100):  # a paginator that never ends cannot hang the start
                page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
                listed += page.tools
                cursor = getattr(page, "next_cursor", getattr(page, "nextCursor", None))
                if not cursor:
                    break
        return session, listed

    async def _main(self) -> None:
        import anyio

        self._loop, self._queue = asyncio.get_running_loop(), asyncio.Queue()
        async with AsyncExitStack() as stack:
            try:
                session, self.listed = await self._open(stack)
            except BaseException as err:
                self._error = err
                self._ready.set()
                raise
            self._ready.set()
            while True:
                item = await self._queue.get()
                if item is None:
                    break
                name, arguments, fut = item
                try:
                    with anyio.fail_after(self.call_timeout):
                        res = await session.call_tool(name, arguments)
                    fut.set_result(res)
                except Exception as err:  # handed to the caller's thread
                    fut.set_exception(err)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[str, bool]:
        """(text, is_error) of one tool call; a failure to reach the server raises McpError."""
        if self._closed or self._loop is None or self._queue is None or not self._thread.is_alive():
            raise McpError(f"MCP server {self.describe()} is not running{self._tail()}")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (name, arguments or {}, fut))
        try:
            return _text_of(fut.result(timeout=self.call_timeout + 10))
        except concurrent.futures.TimeoutError:
            raise McpError(f"{name}: no answer in {self.call_timeout:g}s") from None
        except Exception as err:
            raise McpError(f"{name}: {_why(err)}") from None

    def tools(self, names: list[str] | None = None) -> dict[str, Tool]:
        """The server's tools as arcforge Tools bound to this session (only `names`, if given;
        an unknown name raises ValueError naming the listed ones)."""
        out = {}
        for t in self.listed:
            out[t.name] = Tool(t.name, t.description or "", _schema_of(t), self._bound(t.name))
        if names:
            missing = [n for n in names if n not in out]
            if missing:
                raise ValueError(f"MCP server has no tool(s) {missing}; it lists {sorted(out)}")
            out = {n: out[n] for n in names}
        return out

    def _bound(self, name: str):
        def fn(**arguments: Any) -> str:
            try:
                text, is_error = self.call(name, arguments)
            except McpError as err:
                return f"error: {err}"
            if is_error:
                return text if text.startswith("error:") else f"error: {text or name + ' failed'}"
            return text

        return fn

    def close(self) -> None:
        """Stop the session (and a stdio server's process); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and self._queue is not None and self._thread.is_alive():
            try:
                self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
            except RuntimeError:  # the loop already stopped
                pass
        self._thread.join(timeout=15)
        self._errlog.close()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _why(err: BaseException) -> str:
    """An exception (or an anyio/asyncio exception group) as one line."""
    inner = getattr(err, "exceptions", None)
    if inner:
        return "; ".join(_why(e) for e in inner)
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _fill(value: Any, episode_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace(EPISODE_DIR, episode_dir)
    if isinstance(value, list):
        return [_fill(v, episode_dir) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, episode_dir) for k, v in value.items()}
    return value


def open_server(spec: dict[str, Any], episode_dir: str | None = None, **kw: Any) -> McpClient:
    """An McpClient from a server spec (`{"command"|"url", "env", "cwd"}`, see the module
    docstring), `{episode_dir}` filled in. Raises ValueError for a malformed spec."""
    if not isinstance(spec, dict) or ("command" in spec) == ("url" in spec):
        raise ValueError(f"an MCP server spec needs exactly one of command or url; got {spec!r}")
    unknown = sorted(set(spec) - {"command", "url", "env", "cwd"})
    if unknown:
        raise ValueError(f"MCP server spec has unknown key(s) {unknown}")
    s = _fill(spec, episode_dir) if episode_dir else spec
    env = {str(k): str(v) for k, v in (s.get("env") or {}).items()}
    return McpClient(s.get("command"), s.get("url"), env or None, s.get("cwd"), **kw)


class MCPEnv(Env):
    """Tool use over a live MCP server (see the module docstring).

    Args:
        server: the server for tasks without context["mcp"].
        system_prompt: an optional system message.
        start_timeout: seconds for the server to start and list its tools.
        call_timeout: seconds per tool call.
    """

    def __init__(
        self,
        server: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        start_timeout: float = 60,
        call_timeout: float = 30,
    ) -> None:
        super().__init__(system_prompt)
        self.server = server
        self.start_timeout, self.call_timeout = start_timeout, call_timeout
        self.client: McpClient | None = None
        self.start_error: str | None = None
        self._dir: str | None = None
        self._calls: list[dict[str, Any]] = []

    def check(self, task: Task) -> None:
        if not (task.context.get("mcp") or self.server):
            raise ValueError(f"task {task.id}: MCPEnv needs context['mcp'] or server=")

    def start(self, task: Task) -> list[Message]:
        spec = task.context.get("mcp") or self.server
        self._calls, self.start_error, self.tools = [], None, []
        self._dir = tempfile.mkdtemp(prefix="arcforge-mcp-")
        try:
            self.client = open_server(
                spec, self._dir, start_timeout=self.start_timeout, call_timeout=self.call_timeout
            )
            self.tools = list(self.client.tools(task.tools or None).values())
        except (McpError, ValueError) as err:
            self.start_error = str(err)
        return self.opening(task)

    def call_tool(self, call: ToolCall, tools: dict[str, Tool]) -> Message:
        """The server's answer; every call gets the start error when the server never started."""
        if self.start_error is None:
            return super().call_tool(call, tools)
        return Message(
            "tool", f"error: {self.start_error}", tool_call_id=call.id or None, name=call.name
        )

    def record(self, call: ToolCall, valid: bool, observation: Message) -> None:
        self._calls.append(
            {"name": call.name, "valid": valid, "error": observation.content.startswith("error:")}
        )

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("MCPEnv.verify called before reset")
        task = self.task
        details: dict[str, Any] = {
            "n_tool_calls": len(self._calls),
            "calls_valid": [c["valid"] for c in self._calls],
            "n_errors": sum(c["error"] for c in self._calls),
        }
        if self.start_error:
            details["error"] = self.start_error
        checks: list[bool] = []
        if task.validation.answer is not None:
            answer = extract_answer(self.reply) if self.reply is not None else None
            details["answer"] = answer
            checks.append(answers_match(answer, str(task.validation.answer)))
        state = []
        for c in task.validation.constraints:
            if c.get("type") != "mcp_call":
                continue
            obs = self._check_call(c)
            ok = str(c.get("contains", "")) in obs and not obs.startswith("error:")
            state.append({"tool": c.get("tool"), "ok": ok, "observation": obs[-500:]})
            checks.append(ok)
        if state:
            details["state_checks"] = state
        if not checks:
            details.setdefault("error", f"task {task.id} has no answer and no mcp_call check")
        score = 1.0 if checks and all(checks) and not self.start_error else 0.0
        return Reward(score, details)

    def _check_call(self, c: dict[str, Any]) -> str:
        if self.client is None:
            return f"error: {self.start_error or 'no MCP server'}"
        tools = self.client.tools()  # every tool, not only the ones offered to the model
        call = ToolCall(str(c.get("tool", "")), dict(c.get("arguments") or {}))
        return execute_call(call, tools, max_chars=100_000).content

    def close(self) -> None:
        super().close()
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def abe_server(spec: dict[str, Any], name: str = "arcforge-abe") -> Any:
    """An MCP server (the SDK's low-level `Server`) whose tools are an ABE spec's deployed tools
    (arcforge.envs.abe_env.deploy_tools): the same schemas, the same answers, an unknown tool
    or a call with wrong arguments answered as an `isError` result."""
    import mcp.types as mt
    from mcp.server.lowlevel import Server

    tools = deploy_tools(spec)

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return mt.ListToolsResult(
            tools=[
                mt.Tool(name=t.name, description=t.description, input_schema=t.parameters)
                for t in tools.values()
            ]
        )

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        obs = execute_call(ToolCall(params.name, dict(params.arguments or {})), tools)
        text = obs.content
        return mt.CallToolResult(
            content=[mt.TextContent(text=text)], is_error=text.startswith("error:")
        )

    return Server(name, on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def serve_abe_stdio(spec: dict[str, Any]) -> None:
    """Serve an ABE spec's tools over stdin/stdout until the client closes the stream."""
    from mcp.server.stdio import stdio_server

    server = abe_server(spec)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    asyncio.run(main())


def abe_spec_of(tasks_file: str | Path, task_id: str | None = None) -> dict[str, Any]:
    """The ABE spec (context["abe"]) of one task in a Task JSONL file: `task_id`, or the first
    abe task. Raises ValueError naming what is missing."""
    import json

    path = Path(tasks_file)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    ids = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{i}: not JSON ({err})") from None
        spec = (rec.get("context") or {}).get("abe")
        if isinstance(spec, dict):
            ids.append(str(rec.get("id")))
            if task_id is None or str(rec.get("id")) == task_id:
                return spec
    if task_id is not None:
        raise ValueError(f"{path}: no ABE task {task_id!r}; ABE tasks: {ids[:20]}")
    raise ValueError(f"{path}: no task with context['abe']")
