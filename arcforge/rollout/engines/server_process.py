"""What an engine that starts (or connects to) an inference server shares: `ServerProcess`
(the server's interpreter, work directory and log, start, health, checkpoint pushes, close) and
`export_checkpoint`, the checkpoint directory a server loads. The vLLM (vllm.py) and SGLang
(sglang.py) engines build on them.

Why the checkpoint a server reads is written untied: on CPU vLLM packs every linear layer and
the LM head into a oneDNN handle after loading (`dispatch_cpu_unquantized_gemm`), and
`reload_weights` re-packs only the layers that receive weights. A tied LM head receives none
(the checkpoint has no `lm_head.weight`; vLLM's Llama skips it), so it keeps the handle packed
from the first embedding: after a push the server computes the new model's hidden states
through the old LM head (its log says "ParallelLMHead: Failed to load weights"; its logprobs
equal exactly those of that hybrid). Writing `tie_word_embeddings: false` with an explicit
`lm_head.weight` (a copy of the embedding: the same function) makes the head a layer of its own
that every push reloads and re-packs, so the server's logprobs equal a fresh load's. The cost:
the server holds the embedding matrix twice.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import httpx
import torch
from safetensors.torch import save_file
from torch import nn

from arcforge.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[3]  # where the servers' virtualenvs are built


def export_checkpoint(model: nn.Module, state_dict: dict[str, torch.Tensor], out: Path) -> Path:
    """Write `state_dict` as an untied fp32 HF checkpoint vLLM loads (see the module header).

    Args:
        model: gives the HF config (any Llama-family causal LM).
        state_dict: the weights, HF names; a missing `lm_head.weight` is the tied embedding.
        out: the directory to (re)write.
    Returns:
        `out`.
    """
    out.mkdir(parents=True, exist_ok=True)
    conf = copy.deepcopy(model.config)
    conf.tie_word_embeddings = False
    conf.architectures = [type(model).__name__]  # a bare LlamaConfig has none: vLLM needs it
    conf.save_pretrained(str(out))
    # tied tensors share storage, which safetensors refuses: every tensor gets its own copy
    sd = {
        k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in state_dict.items()
    }
    if "lm_head.weight" not in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    tmp = out / "model.safetensors.tmp"
    save_file(sd, str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """What an engine that starts (or connects to) an inference server shares: finding the
    server's interpreter, its work directory and log, starting it in a session of its own,
    waiting for its health, pushing a checkpoint between the engine's own pause and resume
    calls, closing the server's whole process group, the context-manager protocol and the
    weight version. A subclass names its server (`server_name`), where its interpreter is
    (`python_env`, `default_python`, `python_hint`), and calls `_open_workdir` then `_connect`
    in its `__init__`."""

    _proc: subprocess.Popen | None = None
    _tmp: tempfile.TemporaryDirectory | None = None
    _version = 0
    _ckpt: Path | None = None
    server_name = "inference"
    python_env = ""  # the environment variable that names the interpreter
    default_python = Path("python")
    python_hint = ""  # how to get an interpreter, for the error when there is none

    @classmethod
    def find_python(cls, python: str | None = None) -> Path:
        """The interpreter with the server: `python`, else $`python_env`, else `default_python`
        (a UserError saying how to get one when that is not a file)."""
        path = Path(python or os.environ.get(cls.python_env) or cls.default_python)
        if not path.is_file():
            name = cls.server_name
            raise UserError(f"{name} engine: no {name} python at {path}; {cls.python_hint}")
        return path

    def _open_workdir(self, model: nn.Module, workdir: str | Path | None, prefix: str) -> None:
        """Hold `model` and a work directory for checkpoints and the log (`workdir`, else a
        temporary one named `prefix`...); no server, version 0, no pushes yet."""
        self._model = model
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix=prefix)
        self.workdir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._version, self._lock = 0, threading.Lock()
        self._proc = None
        self.push_seconds: list[float] = []  # wall time of each load_weights

    def _connect(
        self,
        url: str | None,
        request_timeout: float,
        startup_timeout: float,
        start: Callable[[int], None],
    ) -> None:
        """Talk to the server at `url`, else to one `start(port)` launches on a free local
        port; return once it answers /health."""
        if url is None:
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            start(port)
        self.url = url.rstrip("/")
        self._client = httpx.Client(base_url=self.url, timeout=request_timeout)
        self._wait_healthy(startup_timeout)

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def _launch(self, cmd: list[str], env: dict[str, str]) -> None:
        """Start the server command, its output appended to the log; in a session of its own,
        so that `close` ends the whole process group."""
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=self.workdir,
            )

    def _push_checkpoint(
        self, state_dict: dict[str, torch.Tensor], version: int, reload: Callable[[Path], None]
    ) -> None:
        """Write `state_dict` as the checkpoint of `version`, have the server load it
        (`reload(directory)`, under the lock that serialises pushes and generate calls), then
        drop the previous checkpoint; the push's wall time goes to `push_seconds`."""
        t0 = time.perf_counter()
        old = self._ckpt
        new = export_checkpoint(self._model, state_dict, self.workdir / f"weights_v{version}")
        with self._lock:
            reload(new)
            self._ckpt, self._version = new, version
        if old is not None and old != new:
            shutil.rmtree(old, ignore_errors=True)
        self.push_seconds.append(time.perf_counter() - t0)

    def _log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _exit_hint(self, log_tail: str) -> str:
        """What a server's exit log suggests the user do (appended to the error)."""
        return ""

    def _wait_healthy(self, timeout: float) -> None:
        """Poll /health until the server answers 200; a server that exits or stays unhealthy
        past `timeout` is an error carrying its log's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = self._log_tail()
                raise RuntimeError(
                    f"{self.server_name} server exited with {self._proc.returncode}"
                    f"{self._exit_hint(tail)}; log {self.log_path}:\n{tail}"
                )
            try:
                if self._client.get("/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2 if self._proc is None else 1.0)
        self.close()
        raise TimeoutError(
            f"{self.server_name} server at {self.url} not healthy after {timeout:.0f} s; "
            f"log {self.log_path}:\n{self._log_tail()}"
        )

    def close(self) -> None:
        """Stop the server this engine started (its whole process group); idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if getattr(self, "_client", None) is not None:
            self._client.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def version(self) -> int:
        return self._version
