"""Environment services: environments behind a small JSON protocol, in-process, HTTP or Ray.

GLM-5 runs every agentic task family as its own micro-service that registers with the rollout
orchestrator. Here a service is an `EnvService`: a name, the task kinds it serves, its max
concurrency (open episodes) and an endpoint whose `open(task)` returns an `Environment`:

- `LocalEndpoint(factory)`  in-process: the factory's environment itself (no serialization);
- `HttpEndpoint(url)`       an `EnvHost` behind FastAPI (`env_app`, `serve_env_host`), spoken to
                            with httpx;
- `RayEndpoint(actor)`      an `EnvHost` running as a Ray actor (see arcforge.rollout.ray_backend).

The protocol (one JSON object in, one out; `EnvHost` is the server side of it):
    info   {}                               -> {name, kinds, max_concurrency, open}
    open   {task}                           -> {session, messages, tools (OpenAI schemas)}
    step   {session, message}               -> {observations, done, info}
    verify {session}                        -> {score, details}
    close  {session}                        -> {}
Over HTTP these are `GET /info` and `POST /<method>`; errors come back as status 400 (bad
request: unknown kind or session) or 500 (the environment raised) with a `detail` text, and the
client raises `EnvServiceError` naming the service and the call. `RemoteEnv` is the client side
as an `Environment`, so the agent loop runs unchanged against a remote service.
Simplification: one HTTP request per call (no streaming, no keep-alive tuning, no auth).
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from arcforge.envs.base import Environment, StepResult
from arcforge.types import Message, Reward, Task, Tool

Transport = Callable[[str, dict[str, Any]], dict[str, Any]]  # (method, payload) -> reply


class EnvServiceError(RuntimeError):
    """A call to an environment service failed (unreachable, refused, or the env raised)."""


class EnvHost:
    """The service side: open environment sessions for some task kinds, at most `max_concurrency`.

    Args:
        factory: task -> a fresh Environment (e.g. arcforge.envs.registry.env_factory(world)).
        kinds: the task kinds this host serves.
        max_concurrency: the most sessions open at once (`open` refuses beyond it).
        name: shown in errors and in `info`.
        idle_timeout: a session untouched this long (its client crashed) is closed on the next
            `open`, so crashed workers cannot leak the host's slots.
    """

    def __init__(
        self,
        factory: Callable[[Task], Environment],
        kinds: list[str],
        max_concurrency: int = 8,
        name: str = "env",
        idle_timeout: float = 3600.0,
    ) -> None:
        if max_concurrency < 1 or not kinds:
            raise ValueError(f"env host {name!r} needs kinds and max_concurrency >= 1")
        self.factory, self.kinds, self.name = factory, list(kinds), name
        self.max_concurrency, self.idle_timeout = max_concurrency, idle_timeout
        self._sessions: dict[str, Environment] = {}
        self._used: dict[str, float] = {}  # session -> last call (monotonic)
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def info(self, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "name": self.name,
            "kinds": self.kinds,
            "max_concurrency": self.max_concurrency,
            "open": len(self._sessions),
        }

    def _env(self, payload: dict[str, Any]) -> Environment:
        sid = str(payload.get("session"))
        env = self._sessions.get(sid)
        if env is None:
            raise KeyError(f"env host {self.name!r}: no open session {payload.get('session')!r}")
        self._used[sid] = time.monotonic()
        return env

    def _reap(self) -> None:
        old = [s for s, t in self._used.items() if time.monotonic() - t > self.idle_timeout]
        for sid in old:
            self.close({"session": sid})

    def open(self, payload: dict[str, Any]) -> dict[str, Any]:
        task = Task.from_dict(payload["task"])
        if task.kind not in self.kinds:
            raise ValueError(f"env host {self.name!r} serves {self.kinds}, not {task.kind!r}")
        self._reap()
        with self._lock:
            if len(self._sessions) >= self.max_concurrency:
                raise ValueError(f"env host {self.name!r} is full ({self.max_concurrency} open)")
            sid = f"{self.name}-{next(self._ids)}"
            self._sessions[sid] = env = self.factory(task)
            self._used[sid] = time.monotonic()
        try:
            msgs = env.reset(task)
        except Exception:
            self.close({"session": sid})
            raise
        return {
            "session": sid,
            "messages": [m.to_dict() for m in msgs],
            "tools": [t.schema() for t in env.tools],
        }

    def step(self, payload: dict[str, Any]) -> dict[str, Any]:
        res = self._env(payload).step(Message.from_dict(payload["message"]))
        return {
            "observations": [m.to_dict() for m in res.observations],
            "done": res.done,
            "info": res.info,
        }

    def verify(self, payload: dict[str, Any]) -> dict[str, Any]:
        r = self._env(payload).verify()
        return {"score": float(r.score), "details": r.details}

    def close(self, payload: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            env = self._sessions.pop(str(payload.get("session")), None)
            self._used.pop(str(payload.get("session")), None)
        if env is not None:
            env.close()
        return {}

    def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one protocol call (what the HTTP routes and the Ray actor expose)."""
        if method not in ("info", "open", "step", "verify", "close"):
            raise ValueError(f"unknown env protocol method {method!r}")
        return getattr(self, method)(payload)


def _tool(schema: dict[str, Any]) -> Tool:
    fn = schema.get("function", schema)
    return Tool(fn["name"], fn.get("description", ""), fn.get("parameters", {}))


class RemoteEnv:
    """An Environment whose calls go through a transport to an `EnvHost` (HTTP or Ray)."""

    def __init__(self, transport: Transport, where: str) -> None:
        self._call, self.where = transport, where
        self.tools: list[Tool] = []
        self._session: str | None = None

    def reset(self, task: Task) -> list[Message]:
        self.close()
        out = self._call("open", {"task": task.to_dict()})
        self._session, self.tools = out["session"], [_tool(s) for s in out["tools"]]
        return [Message.from_dict(m) for m in out["messages"]]

    def step(self, message: Message) -> StepResult:
        out = self._call("step", {"session": self._session, "message": message.to_dict()})
        obs = [Message.from_dict(m) for m in out["observations"]]
        return StepResult(obs, bool(out["done"]), dict(out.get("info") or {}))

    def verify(self) -> Reward:
        out = self._call("verify", {"session": self._session})
        return Reward(float(out["score"]), dict(out.get("details") or {}))

    def close(self) -> None:
        if self._session is not None:
            sid, self._session = self._session, None
            try:
                self._call("close", {"session": sid})
            except EnvServiceError:
                pass  # the service is gone: nothing left to close


# ---- endpoints ---------------------------------------------------------------------------


@dataclass
class LocalEndpoint:
    """In-process environments straight from a factory."""

    factory: Callable[[Task], Environment]

    def open(self, task: Task) -> Environment:
        return self.factory(task)

    def __str__(self) -> str:
        return "in-process"


@dataclass
class HttpEndpoint:
    """An EnvHost behind `env_app` at `url`; `timeout` bounds every call (seconds)."""

    url: str
    timeout: float = 600.0
    _client: httpx.Client | None = field(default=None, repr=False, compare=False)

    def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            self._client = httpx.Client(base_url=self.url.rstrip("/"), timeout=self.timeout)
        try:
            if method == "info":
                r = self._client.get("/info")
            else:
                r = self._client.post(f"/{method}", json=payload)
        except httpx.HTTPError as err:
            raise EnvServiceError(
                f"env service {self.url}: {method} failed: {type(err).__name__}: {err}"
            ) from None
        if r.status_code != 200:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise EnvServiceError(
                f"env service {self.url}: {method} answered {r.status_code}: {str(detail)[:500]}"
            )
        return r.json()

    def open(self, task: Task) -> Environment:
        return RemoteEnv(self.call, self.url)

    def __str__(self) -> str:
        return self.url

    def __getstate__(self) -> dict[str, Any]:  # picklable for Ray workers: no live client
        return {"url": self.url, "timeout": self.timeout, "_client": None}


@dataclass
class EnvService:
    """One registered service: which kinds it serves, how many episodes at once, and where."""

    name: str
    kinds: list[str]
    max_concurrency: int
    endpoint: Any  # LocalEndpoint | HttpEndpoint | RayEndpoint: has open(task) -> Environment

    def open(self, task: Task) -> Environment:
        return self.endpoint.open(task)


def local_service(
    name: str, kinds: list[str], factory: Callable[[Task], Environment], max_concurrency: int = 8
) -> EnvService:
    """An in-process service over `factory`."""
    return EnvService(name, list(kinds), max_concurrency, LocalEndpoint(factory))


def http_service(url: str, timeout: float = 600.0) -> EnvService:
    """A service at `url`; its name, kinds and concurrency are read from GET /info."""
    ep = HttpEndpoint(url, timeout)
    info = ep.call("info", {})
    return EnvService(info["name"], list(info["kinds"]), int(info["max_concurrency"]), ep)


# ---- the HTTP server ---------------------------------------------------------------------


def env_app(host: EnvHost):
    """A FastAPI app exposing `host` over the JSON protocol (sync routes run in a threadpool)."""
    from fastapi import Body, FastAPI, HTTPException

    app = FastAPI(title=f"arcforge env service {host.name}")

    @app.get("/info")
    def info() -> dict:
        return host.info()

    @app.post("/{method}")
    def call(method: str, payload: dict = Body(...)) -> dict:  # noqa: B008
        if method not in ("open", "step", "verify", "close"):
            raise HTTPException(404, f"unknown method {method!r}")
        try:
            return host.call(method, payload)
        except (KeyError, ValueError, TypeError) as err:
            raise HTTPException(400, f"{type(err).__name__}: {err}") from None
        except Exception as err:  # the environment itself failed
            raise HTTPException(500, f"{type(err).__name__}: {err}") from None

    return app


class BackgroundServer:
    """Run `env_app(host)` with uvicorn in a daemon thread (tests, benchmarks, one-box runs).

    `url` is set once started; `stop()` shuts it down (open sessions are closed by the host's
    owner, not here). port 0 picks a free port.
    """

    def __init__(self, host: EnvHost, bind: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        if port == 0:
            with socket.socket() as s:
                s.bind((bind, 0))
                port = s.getsockname()[1]
        self.url = f"http://{bind}:{port}"
        config = uvicorn.Config(env_app(host), host=bind, port=port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise EnvServiceError(f"env service at {self.url} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def serve_env_host(host: EnvHost, bind: str = "0.0.0.0", port: int = 8100) -> None:
    """Serve `host` over HTTP until interrupted (blocks); the multi-machine deployment path."""
    import uvicorn

    uvicorn.run(env_app(host), host=bind, port=port, log_level="info")
