"""ReplayServer: a scripted OpenAI-compatible chat server on loopback, for tests and dry runs.

It is the fake at the edge we do not own (a remote LLM): a real HTTP server (FastAPI served by
uvicorn in a background thread on 127.0.0.1, a free port) that answers `/v1/chat/completions`
from canned responses, so every LLM-driven step runs its real client code (httpx, retries,
JSON repair) end to end in tests.

    with ReplayServer(['{"a": 1}', "second reply"]) as srv:
        LLMClient(srv.base_url, "replay").chat([...])

`responses` is either a list (answered in order, one per choice; running out is an HTTP 410
naming the request number, which the client does not retry) or a function
`messages -> text` (called once per choice). `fail_first=k` answers the first k requests with
HTTP 503 to exercise retries. `.requests` holds every received request body, failed ones
included, in arrival order; `.headers` the matching request headers (lower-case names).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Responder = list[str] | Callable[[list[dict]], str]


class ReplayServer:
    """Canned chat completions over real HTTP (see the module docstring).

    Args:
        responses: replies in order, or a function of the request's messages.
        fail_first: the first k requests get HTTP 503.
        model: the name /v1/models reports.
    """

    def __init__(self, responses: Responder, fail_first: int = 0, model: str = "replay"):
        self.responses = responses if callable(responses) else list(responses)
        self.fail_first, self.model = fail_first, model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._next = 0
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def _reply(self, messages: list[dict]) -> str | None:
        if callable(self.responses):
            return self.responses(messages)
        if self._next >= len(self.responses):
            return None
        self._next += 1
        return self.responses[self._next - 1]

    def _app(self) -> FastAPI:
        app = FastAPI(title="arcforge replay")

        @app.get("/v1/models")
        def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                self.headers.append(dict(request.headers))
                number = len(self.requests)
                if number <= self.fail_first:
                    return JSONResponse({"error": "replay: scripted failure"}, status_code=503)
                texts = []
                for _ in range(int(body.get("n") or 1)):
                    text = self._reply(body.get("messages") or [])
                    if text is None:
                        msg = f"replay: no canned response left for request {number}"
                        return JSONResponse({"error": msg}, status_code=410)
                    texts.append(text)
            choices = [
                {
                    "index": i,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": t},
                }
                for i, t in enumerate(texts)
            ]
            return JSONResponse(
                {
                    "id": f"chatcmpl-{uuid.uuid4().hex}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": self.model,
                    "choices": choices,
                }
            )

        return app

    def start(self) -> ReplayServer:
        """Bind a free loopback port and serve in a daemon thread; returns self."""
        self._server, self._thread, self.base_url = serve_in_thread(self._app())
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    """Serve an ASGI app with uvicorn on a free 127.0.0.1 port in a daemon thread.

    Returns (server, thread, base_url); stop with `server.should_exit = True; thread.join()`.
    Also used to put an in-process `arcforge serve` app behind an LLMClient."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError("HTTP server did not start within 20 s")
    return server, thread, f"http://127.0.0.1:{port}"
