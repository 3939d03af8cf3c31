"""`bfcl:<category>`: the Berkeley Function-Calling Leaderboard (BFCL v4), run and scored by
PyPI's `bfcl-eval` itself.

Where bfcl-eval runs: in a virtualenv of its own (`.venv-bfcl`, built by `make setup-bfcl`, or
any interpreter named by `ARCFORGE_BFCL_PYTHON`), driven through a subprocess
(`bfcl_worker.py`), not installed `--no-deps` into arcforge's environment. Its AST checker
imports `constants.model_config`, which imports every vendor handler BFCL ships (anthropic,
cohere, mistralai, google-genai, boto3, writer-sdk, qwen-agent, ...), and it pins numpy 1.26.4
against our 2.x; installing "only what the checker imports" would mean installing those API
clients beside our stack anyway. Its own environment keeps its pins, and it is the same
environment in which `bfcl evaluate` re-scores our result files (benchmarks/bfcl_agreement.py).
It holds bfcl-eval installed `--no-deps` plus only what that import chain and the `bfcl` CLI
need (the Makefile's `BFCL_DEPS`, pinned in constraints-bfcl.txt): the vendor clients, the
tree-sitter parsers, numpy and pandas, mpmath for the multi-turn MathAPI. It leaves out
sentence-transformers (and with it torch) and faiss-cpu: only BFCL's memory and web-search
backends import them, lazily, for categories arcforge does not run.

What runs there is BFCL's own code, unmodified: its data files and possible answers, its
inference loop (`BaseHandler.inference`: the "prompt" mode's system prompt with the functions
in text and its decoder, the function-calling mode's tool compilation `convert_to_tool`, the
multi-turn loop against its executable API classes with its step limit), and the evaluation
runner's per-entry checks (AST checker, relevance check, multi-turn state and response
checkers). Only the OpenAI client inside BFCL's `OpenAICompletionsHandler` is replaced: each of
its calls becomes one turn of arcforge's `Responder`.

Modes (`?mode=fc`, the default, or `?mode=prompt`) map to a BFCL registry entry, which fixes
how BFCL decodes and checks the replies and names the result folder. BFCL's registry has no
vendor-neutral OpenAI-compatible entry; arcforge files under `kimi-k2-0905-preview-FC` (fc) and
`kimi-k2-0905-preview` (prompt), whose handler is `OpenAICompletionsHandler` with only the base
URL changed, so `bfcl evaluate --model <that name>` decodes and checks our files exactly as
arcforge does. `?out=DIR` writes BFCL's result files under DIR.

Baselines on the same items: `first_function_empty_args` (a call to the item's first function
with no arguments; AST categories) and `never_call` (every category).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from arcforge.errors import UserError
from arcforge.eval.external.base import ItemResult, Responder, SuiteResult, SuiteSpec, register

BFCL_EVAL_VERSION = "2026.3.23"
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PYTHON = REPO_ROOT / ".venv-bfcl" / "bin" / "python"
PYTHON_ENV = "ARCFORGE_BFCL_PYTHON"
WORKER = Path(__file__).with_name("bfcl_worker.py")

AST_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")
MULTI_TURN_CATEGORIES = ("multi_turn_base",)
CATEGORIES = AST_CATEGORIES + RELEVANCE_CATEGORIES + MULTI_TURN_CATEGORIES
REGISTRY = {"fc": "kimi-k2-0905-preview-FC", "prompt": "kimi-k2-0905-preview"}
OPTIONS = ("mode", "out", "batch")


def find_python() -> Path:
    """bfcl-eval's interpreter: `$ARCFORGE_BFCL_PYTHON`, else the repository's `.venv-bfcl`."""
    python = Path(os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
    if not python.exists():
        raise UserError(
            f"bfcl suites need bfcl-eval=={BFCL_EVAL_VERSION} in its own virtualenv: "
            f"run `make setup-bfcl` (builds .venv-bfcl) or set {PYTHON_ENV} to a python that "
            f"has it ({python} does not exist)"
        )
    return python


@functools.cache
def package_dir(python: Path | None = None) -> Path:
    """The installed `bfcl_eval` package folder (its `data/` holds the items and answers)."""
    out = subprocess.run(
        [
            str(python or find_python()),
            "-c",
            "import bfcl_eval, os; print(os.path.dirname(bfcl_eval.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


class BfclWorker:
    """One `bfcl_worker.py` process; requests (and a suite's whole pass) hold its lock."""

    def __init__(self, python: Path):
        self.python = python
        self._root = tempfile.TemporaryDirectory(prefix="arcforge-bfcl-")
        self._log = open(Path(self._root.name) / "worker.log", "w+")  # noqa: SIM115
        env = dict(os.environ)
        # BFCL's handlers build an OpenAI client at construction; no request ever reaches it
        env.update(
            BFCL_PROJECT_ROOT=self._root.name,
            OPENAI_API_KEY=env.get("OPENAI_API_KEY", "unused"),
            KIMI_API_KEY="unused",
            PYTHONUNBUFFERED="1",
        )
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self.lock = threading.RLock()
        self._runs = 0
        ready = self._recv()
        self.version = ready["version"]

    def _recv(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        if not line:
            self._log.flush()
            self._log.seek(0)
            tail = self._log.read()[-2000:]
            raise RuntimeError(f"bfcl worker ({self.python}) exited:\n{tail}")
        return json.loads(line)

    def _send(self, obj: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def request(self, obj: dict[str, Any], responder: Responder | None = None) -> dict[str, Any]:
        """Send one request; answer its `respond` callbacks with `responder`."""
        with self.lock:
            return self._exchange(obj, responder)

    def _exchange(self, obj: dict[str, Any], responder: Responder | None) -> dict[str, Any]:
        self._send(obj)
        while True:
            msg = self._recv()
            if msg["op"] == "respond_many":
                self._send({"op": "replies", "replies": _answer_many(responder, msg["requests"])})
                continue
            if msg["op"] != "respond":
                if msg["op"] == "error":
                    raise RuntimeError(f"bfcl worker: {msg['error']}\n{msg.get('trace', '')}")
                return msg
            try:
                if responder is None:
                    raise RuntimeError("no responder for this request")
                reply = normalize_message(responder(msg["messages"], msg.get("tools")))
                self._send({"op": "reply", "message": reply})
            except Exception as e:  # a failing responder fails its item, not the run
                self._send({"op": "abort", "error": f"{type(e).__name__}: {e}"})

    def new_run(self) -> str:
        self._runs += 1
        return f"r{os.getpid()}_{self._runs}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()
        self._root.cleanup()


def _answer_many(responder: Responder | None, requests: list[dict[str, Any]]) -> list[dict]:
    """One batch of turns: `respond_many` when the responder has it (one batched generation),
    else one call per turn. A failing turn fails its item, not the batch."""
    if responder is None:
        return [{"error": "no responder for this request"}] * len(requests)
    many = getattr(responder, "respond_many", None)
    if many is not None:
        try:
            replies = many([(r["messages"], r.get("tools")) for r in requests])
            return [{"message": normalize_message(m)} for m in replies]
        except Exception:  # retry one by one: the error lands on the turns that cause it
            pass
    out = []
    for r in requests:
        try:
            out.append({"message": normalize_message(responder(r["messages"], r.get("tools")))})
        except Exception as e:
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


_WORKERS: dict[Path, BfclWorker] = {}
_WORKERS_LOCK = threading.Lock()


def worker() -> BfclWorker:
    """The process-wide worker for the configured interpreter (started on first use; its
    import of bfcl-eval takes several seconds)."""
    python = find_python()
    with _WORKERS_LOCK:
        w = _WORKERS.get(python)
        if w is None or not w.alive():
            w = _WORKERS[python] = BfclWorker(python)
        return w


@atexit.register
def _close_workers() -> None:
    for w in _WORKERS.values():
        w.close()
    _WORKERS.clear()


def normalize_message(msg: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped assistant message with string arguments and call ids."""
    calls = []
    for i, c in enumerate(msg.get("tool_calls") or []):
        fn = c.get("function", c)
        args = fn.get("arguments", "{}")
        calls.append(
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    out = {"role": "assistant", "content": msg.get("content"), "tool_calls": calls or None}
    if msg.get("usage"):
        out["usage"] = msg["usage"]
    return out


def never_call(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None):
    """Baseline: answer in words, never call a function."""
    return {"role": "assistant", "content": "I cannot help with that.", "tool_calls": None}


def first_function_empty_args(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
):
    """Baseline: call the item's first function with no arguments (fc mode)."""
    if not tools:
        return never_call(messages, tools)
    name = tools[0]["function"]["name"]
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class BfclSuite:
    """`bfcl:<category>?mode=fc|prompt&n=..&seed=..&out=DIR`."""

    def __init__(self, spec: SuiteSpec):
        if spec.arg not in CATEGORIES:
            raise UserError(
                f"external suite {spec.prefix}:{spec.arg}: unknown BFCL category {spec.arg!r}; "
                f"known: {', '.join(CATEGORIES)}"
            )
        unknown = sorted(set(spec.options) - set(OPTIONS))
        if unknown:
            raise UserError(
                f"external suite {spec.name}: unknown option(s) {unknown}; "
                f"known: n, seed, {', '.join(OPTIONS)}"
            )
        self.mode = spec.options.get("mode", "fc")
        if self.mode not in REGISTRY:
            raise UserError(
                f"external suite {spec.name}: mode must be 'fc' or 'prompt', not {self.mode!r}"
            )
        self.spec = spec
        self.category = spec.arg
        self.out = Path(spec.options["out"]) if spec.options.get("out") else None
        # items whose turns share one batched generation (multi-turn: a turn at a time); the
        # engine sorts a generation's prompts by length and cuts them into its own batches, so
        # a large round trip pads each batch only to prompts of similar length
        self.batch = spec.int_option("batch", 256)

    def _pass(
        self, responder: Responder, mode: str, ids: list[str], out: Path | None
    ) -> tuple[list[ItemResult], list[str]]:
        w = worker()
        with w.lock:
            run = w.new_run()
            w.request(
                {
                    "op": "begin",
                    "run": run,
                    "category": self.category,
                    "mode": mode,
                    "registry": REGISTRY[mode],
                    "result_dir": str(out) if out else None,
                }
            )
            items = []
            try:
                for s in range(0, len(ids), self.batch):
                    chunk = ids[s : s + self.batch]
                    done = w.request({"op": "items", "run": run, "ids": chunk}, responder)
                    for d in done["items"]:
                        detail = dict(d["detail"])
                        detail["result"] = d["result"][:1000]
                        items.append(ItemResult(d["id"], 1.0 if d["valid"] else 0.0, detail))
            finally:
                ended = w.request({"op": "end", "run": run})
        return items, ended["files"]

    def contamination_items(self) -> list[dict[str, Any]]:
        """The drawn items as the contamination check reads them: `prompt` (the user turns),
        `reference` (the reference calls) and `names` (the offered functions)."""
        w = worker()
        ids = self.spec.draw(w.request({"op": "load", "category": self.category})["ids"])
        return w.request({"op": "texts", "category": self.category, "ids": ids})["items"]

    def run(self, responder: Responder, baselines: bool = True) -> SuiteResult:
        t0 = time.time()
        w = worker()
        loaded = w.request({"op": "load", "category": self.category})
        ids = self.spec.draw(loaded["ids"])
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
        items, files = self._pass(responder, self.mode, ids, self.out)
        meta = {
            "benchmark": "bfcl",
            "bfcl_eval_version": w.version,
            "category": self.category,
            "mode": self.mode,
            "bfcl_registry": REGISTRY[self.mode],
            "n": len(ids),
            "of": len(loaded["ids"]),
            "seed": self.spec.seed if self.spec.n is not None else None,
            "wall_s": round(time.time() - t0, 2),
        }
        if files:
            meta["result_files"] = files
        result = SuiteResult(self.spec.name, items, meta)
        if baselines:
            fns: dict[str, Responder] = {"never_call": never_call}
            if self.category in AST_CATEGORIES:
                fns["first_function_empty_args"] = first_function_empty_args
            for name, fn in fns.items():
                scored, _ = self._pass(fn, "fc", ids, None)
                result.baselines[name] = sum(i.score for i in scored) / max(len(scored), 1)
        return result


@register("bfcl")
def open_bfcl(spec: SuiteSpec) -> BfclSuite:
    return BfclSuite(spec)
