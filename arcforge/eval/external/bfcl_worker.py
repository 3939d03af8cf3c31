"""BFCL's side of the `bfcl:` suites: a line-protocol server that runs inside bfcl-eval's own
virtualenv (`.venv-bfcl`, `make setup-bfcl`) and imports nothing of arcforge.

It drives BFCL's own inference loop (`BaseHandler.inference` through the generation script's
`multi_threaded_inference`: BFCL's system prompt and tool compilation, the multi-turn loop with
its API class instances and step limit) with BFCL's `OpenAICompletionsHandler` family, whose
OpenAI client is replaced by a proxy that asks the parent process for each assistant turn. It
scores each item with the evaluation runner's own per-entry functions (AST checker, relevance
check, multi-turn state/response checkers) and writes BFCL's own result files.

Protocol, one JSON object per line. Parent -> worker: `{"op": "load", "category"}`,
`{"op": "begin", "run", "category", "mode", "registry", "result_dir"}`, `{"op": "item", "run",
"id"}`, `{"op": "items", "run", "ids"}`, `{"op": "end", "run"}`, and `{"op": "reply", "message"}`
/ `{"op": "abort", "error"}` answering a `respond` request, `{"op": "replies", "replies": [...]}`
(one `{"message"}` or `{"error"}` per request, in order) answering a `respond_many`. Worker ->
parent: `{"op": "respond", "messages", "tools"}` while an item runs, `{"op": "respond_many",
"requests": [{"messages", "tools"}, ...]}` while a batch runs, then one answer per request
(`loaded`, `begun`, `done`, `done_many`, `ended`, or `error`).

`items` runs every item of the batch in its own thread through BFCL's own inference loop (BFCL
itself runs items on a thread pool). Whenever every unfinished item waits on its next assistant
turn, the waiting turns go to the parent as one `respond_many`, which the parent answers with one
batched generation: single-turn categories take one round trip per batch, multi-turn ones one
per turn.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
import traceback
from pathlib import Path

# BFCL prints progress to stdout; the protocol keeps the original stdout to itself.
_PROTO = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr

from importlib.metadata import version  # noqa: E402

from bfcl_eval._llm_response_generation import multi_threaded_inference  # noqa: E402
from bfcl_eval.constants.enums import Language, ReturnFormat  # noqa: E402
from bfcl_eval.eval_checker import eval_runner  # noqa: E402
from bfcl_eval.utils import (  # noqa: E402
    is_multi_turn,
    is_relevance_or_irrelevance,
    load_dataset_entry,
    load_ground_truth_entry,
    sort_file_content_by_id,
)
from openai.types.chat import ChatCompletion  # noqa: E402


def _jsonable(o):
    if hasattr(o, "model_dump"):
        return o.model_dump(exclude_none=True)
    return str(o)


def send(obj: dict) -> None:
    _PROTO.write(json.dumps(obj, default=_jsonable) + "\n")
    _PROTO.flush()


def recv() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


class _Completions:
    """`client.chat.completions.create`: one round trip to the parent's responder."""

    def __init__(self, registry: str):
        self.registry = registry

    def create(self, **kwargs):
        messages = [
            m if isinstance(m, dict) else {"content": None, **_jsonable(m)}
            for m in kwargs["messages"]
        ]
        batch = getattr(_LOCAL, "batch", None)
        if batch is not None:
            reply = batch.ask({"messages": messages, "tools": kwargs.get("tools")})
        else:
            send({"op": "respond", "messages": messages, "tools": kwargs.get("tools")})
            reply = recv()
        if reply.get("op") != "reply":
            raise RuntimeError(f"responder failed: {reply.get('error', reply)}")
        msg = reply["message"]
        calls = msg.get("tool_calls") or None
        body = {"role": "assistant", "content": msg.get("content")}
        if calls:
            body["tool_calls"] = calls
        usage = msg.get("usage") or {}
        return ChatCompletion.model_validate(
            {
                "id": "arcforge",
                "object": "chat.completion",
                "created": 0,
                "model": self.registry,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls" if calls else "stop",
                        "message": body,
                    }
                ],
                "usage": {
                    "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                    "completion_tokens": int(usage.get("completion_tokens", 0)),
                    "total_tokens": int(usage.get("total_tokens", 0)),
                },
            }
        )


_LOCAL = threading.local()  # the batch an item thread belongs to


class _TurnRequests:
    """Item threads park their turn requests here until the main thread answers them all."""

    def __init__(self, n: int):
        self.cond = threading.Condition()
        self.active = n  # unfinished items
        self.pending: dict[int, dict] = {}  # thread id -> its waiting request
        self.replies: dict[int, dict] = {}

    def ask(self, request: dict) -> dict:
        me = threading.get_ident()
        with self.cond:
            self.pending[me] = request
            self.cond.notify_all()
            self.cond.wait_for(lambda: me in self.replies)
            return self.replies.pop(me)

    def finished(self) -> None:
        with self.cond:
            self.active -= 1
            self.cond.notify_all()

    def serve(self) -> None:
        """Answer turns until every item is done: one `respond_many` per round."""
        while True:
            with self.cond:
                self.cond.wait_for(lambda: len(self.pending) == self.active)
                if self.active == 0:
                    return
                waiting, self.pending = self.pending, {}
            keys = list(waiting)
            send({"op": "respond_many", "requests": [waiting[k] for k in keys]})
            answer = recv()
            replies = answer.get("replies") if answer.get("op") == "replies" else None
            if not isinstance(replies, list) or len(replies) != len(keys):
                replies = [{"error": f"bad answer to respond_many: {str(answer)[:200]}"}] * len(
                    keys
                )
            with self.cond:
                for k, r in zip(keys, replies):
                    ok = isinstance(r, dict) and "message" in r
                    self.replies[k] = (
                        {"op": "reply", "message": r["message"]}
                        if ok
                        else {"op": "abort", "error": (r or {}).get("error", "no reply")}
                    )
                self.cond.notify_all()


class _Client:
    def __init__(self, registry: str):
        self.chat = type("Chat", (), {"completions": _Completions(registry)})()


_CATEGORIES: dict[str, dict] = {}
_RUNS: dict[str, dict] = {}


def _category(name: str) -> dict:
    """Generation entries (with BFCL's language hint, as `bfcl generate` loads them), evaluation
    entries (without, as `bfcl evaluate` loads them) and the aligned ground truth."""
    if name not in _CATEGORIES:
        gen = load_dataset_entry(name)
        ev = load_dataset_entry(name, include_prereq=False, include_language_specific_hint=False)
        gt = None if is_relevance_or_irrelevance(name) else load_ground_truth_entry(name)
        _CATEGORIES[name] = {
            "gen": {e["id"]: e for e in gen},
            "eval": {e["id"]: e for e in ev},
            "gt": None if gt is None else {e["id"]: g for e, g in zip(ev, gt)},
            "ids": [e["id"] for e in gen],
        }
    return _CATEGORIES[name]


def _score(run: dict, entry_id: str, result) -> dict:
    cat, name, handler = _category(run["category"]), run["category"], run["handler"]
    prompt = copy.deepcopy(cat["eval"][entry_id])
    if is_relevance_or_irrelevance(name):
        return eval_runner._evaluate_single_relevance_entry(
            handler, entry_id, result, prompt, run["registry"], name
        )
    gt = cat["gt"][entry_id]["ground_truth"]
    if is_multi_turn(name):
        # the API instances live in module globals keyed by this name: one per run
        return eval_runner._evaluate_single_multi_turn_entry(
            handler, entry_id, result, gt, prompt, run["instance_key"], name
        )
    return eval_runner._evaluate_single_ast_entry(
        handler,
        entry_id,
        result,
        gt,
        prompt,
        run["registry"],
        name,
        language=Language.PYTHON,
        return_format=ReturnFormat.PYTHON,
        has_tool_call_tag=False,
    )


def _detail(verdict: dict) -> dict:
    err = verdict.get("error")
    if isinstance(err, dict):
        return {
            "error_type": err.get("error_type", ""),
            "error": str(err.get("error_message", ""))[:500],
        }
    if verdict.get("valid"):
        return {}
    return {"error_type": verdict.get("error_type", ""), "error": str(err)[:500]}


def _texts(cat: dict, entry_id: str) -> dict:
    """What a contamination check compares with training text: the user turns, the reference
    calls (first possible value of each argument) and the offered function names."""
    entry = cat["eval"][entry_id]
    turns = entry.get("question") or []
    prompt = "\n".join(
        str(m.get("content", ""))
        for turn in turns
        for m in (turn if isinstance(turn, list) else [turn])
        if isinstance(m, dict) and m.get("role") == "user"
    )
    calls = []
    gt = (cat["gt"] or {}).get(entry_id, {}).get("ground_truth") if cat["gt"] else None
    for call in gt if isinstance(gt, list) else []:
        if not isinstance(call, dict):  # multi-turn ground truth: call strings per turn
            calls += [str(c) for c in (call if isinstance(call, list) else [call])]
            continue
        for name, args in call.items():
            vals = ", ".join(
                f"{k}={v[0]!r}" if isinstance(v, list) and v else f"{k}={v!r}"
                for k, v in (args or {}).items()
            )
            calls.append(f"{name}({vals})")
    names = [f.get("name", "") for f in entry.get("function") or [] if isinstance(f, dict)]
    return {"id": entry_id, "prompt": prompt, "reference": "\n".join(calls), "names": names}


def _finish(run: dict, entry_id: str, written: dict) -> dict:
    """Write an item's result file (when asked) and score it with BFCL's own checker."""
    if run["result_dir"] is not None:
        run["handler"].write(written, result_dir=run["result_dir"])
        run["files"].update(str(p) for p in run["result_dir"].rglob("*_result.json"))
    try:
        verdict = _score(run, entry_id, written["result"])
    except Exception as e:  # BFCL's checker failed on this reply: the item fails, not the run
        verdict = {"valid": False, "error_type": "checker_exception", "error": repr(e)}
    result = written["result"]
    return {
        "valid": bool(verdict["valid"]),
        "detail": _detail(verdict),
        "result": result if isinstance(result, str) else json.dumps(result, default=str),
    }


def handle(req: dict) -> dict:
    op = req["op"]
    if op == "load":
        cat = _category(req["category"])
        return {"op": "loaded", "ids": cat["ids"], "version": version("bfcl-eval")}
    if op == "texts":
        cat = _category(req["category"])
        return {"op": "texts", "items": [_texts(cat, i) for i in req["ids"]]}
    if op == "begin":
        handler = eval_runner.get_handler(req["registry"])
        handler.client = _Client(req["registry"])
        key = f"arcforge_{req['run']}"
        handler.model_name_underline_replaced = key
        _RUNS[req["run"]] = {
            "category": req["category"],
            "registry": req["registry"],
            "handler": handler,
            "instance_key": key,
            "result_dir": Path(req["result_dir"]) if req.get("result_dir") else None,
            "files": set(),
        }
        return {"op": "begun"}
    if op == "item":
        run = _RUNS[req["run"]]
        entry = copy.deepcopy(_category(run["category"])["gen"][req["id"]])
        written = multi_threaded_inference(run["handler"], entry, False, True)
        return {"op": "done", **_finish(run, req["id"], written)}
    if op == "items":
        run = _RUNS[req["run"]]
        ids = list(req["ids"])
        batch, written = _TurnRequests(len(ids)), {}

        def one(entry_id: str) -> None:
            _LOCAL.batch = batch
            try:
                entry = copy.deepcopy(_category(run["category"])["gen"][entry_id])
                written[entry_id] = multi_threaded_inference(run["handler"], entry, False, True)
            except Exception as e:  # BFCL records inference errors itself; this is a last guard
                written[entry_id] = {"id": entry_id, "result": f"Error during inference: {e}"}
            finally:
                batch.finished()

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in ids]
        for t in threads:
            t.start()
        batch.serve()
        for t in threads:
            t.join()
        return {"op": "done_many", "items": [{"id": i, **_finish(run, i, written[i])} for i in ids]}
    if op == "end":
        run = _RUNS.pop(req["run"])
        for f in sorted(run["files"]):
            sort_file_content_by_id(Path(f))
        return {"op": "ended", "files": sorted(run["files"])}
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    send({"op": "ready", "version": version("bfcl-eval")})
    while True:
        req = recv()
        try:
            send(handle(req))
        except Exception as e:  # the parent turns this into a clear error for its item
            send(
                {
                    "op": "error",
                    "error": f"{type(e).__name__}: {e}",
                    "trace": traceback.format_exc(),
                }
            )


if __name__ == "__main__":
    main()
