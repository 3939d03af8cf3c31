"""`bfcl:` suites through arcforge's path, scored by bfcl-eval's own checkers (in .venv-bfcl).

No model is involved: the responders here are written in the test and scripted from the
benchmark's own answers (`bfcl_eval/data/possible_answer/`): they replay BFCL's possible-answer
calls as tool calls (fc mode) or as the text BFCL's prompt format expects (prompt mode), or an
altered copy of them (a wrong value, a missing required argument, a wrong function name), which
BFCL's checker must reject. The suites need bfcl-eval's virtualenv (`make setup-bfcl`; `make
test` builds it); without it they skip, saying so.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from arcforge.errors import UserError
from arcforge.eval.external import bfcl, open_suite, parse_spec

pytestmark = pytest.mark.skipif(
    not Path(os.environ.get(bfcl.PYTHON_ENV) or bfcl.DEFAULT_PYTHON).exists(),
    reason="bfcl-eval's virtualenv is missing: run `make setup-bfcl`",
)


def _answers(category: str) -> dict[str, list]:
    path = bfcl.package_dir() / "data" / "possible_answer" / f"BFCL_v4_{category}.json"
    return {e["id"]: e["ground_truth"] for e in map(json.loads, path.read_text().splitlines())}


def _entries(category: str) -> list[dict]:
    path = bfcl.package_dir() / "data" / f"BFCL_v4_{category}.json"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _user_turns(entry: dict) -> list[str]:
    return [m["content"] for turn in entry["question"] for m in turn if m["role"] == "user"]


def _find(entries: list[dict], messages, tools, names_of=None) -> dict:
    """The item being asked: the one whose user messages begin as the conversation's do and
    (when `names_of` gives an item's function names) whose functions are the ones offered:
    the tools (fc) or the functions named in the system prompt (prompt). Question texts repeat
    across BFCL items, hence the second test."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    offered = sorted(t["function"]["name"] for t in tools or [])
    for e in entries:
        if _user_turns(e)[: len(users)] != users:
            continue
        if names_of is None:
            return e
        names = names_of(e)
        if tools and sorted(n.replace(".", "_") for n in names) == offered:
            return e
        if not tools and all(f'"{n}"' in system for n in names):
            return e
    raise LookupError(f"no BFCL item asks {users[-1][:80]!r}")


def _optional(choices) -> bool:
    return isinstance(choices, list) and "" in choices


def _pick(choices):
    """One acceptable value from BFCL's list of acceptable values (dicts recursively); `""`
    among them marks an argument that may be left out."""
    if not isinstance(choices, list):
        return choices
    values = [c for c in choices if c != ""]
    if not values:  # a nested key no value satisfies (a few live items); left to fail
        return []
    value = values[0]
    if isinstance(value, dict):
        return {k: _pick(v) for k, v in value.items() if not _optional(v)}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [{k: _pick(v) for k, v in d.items() if not _optional(v)} for d in value]
    return value


def _calls(entry: dict, gt: list[dict]) -> list[tuple[str, dict]]:
    """BFCL's possible answer -> (function name, arguments), one acceptable value each: an
    argument that may be left out is, unless the function's doc requires it."""
    docs = {f["name"]: f["parameters"] for f in entry["function"]}
    out = []
    for call in gt:
        ((name, params),) = call.items()
        required = set(docs[name].get("required", []))
        args = {k: _pick(v) for k, v in params.items() if not _optional(v) or k in required}
        out.append((name, args))
    return out


def _tool_name(name: str, tools) -> str:
    names = [t["function"]["name"] for t in tools or []]
    return name if name in names else name.replace(".", "_")


def _fc(calls, tools):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": _tool_name(n, tools), "arguments": json.dumps(a)},
            }
            for i, (n, a) in enumerate(calls)
        ],
    }


class AnswerResponder:
    """Replays the possible answer of the item being asked, as tool calls (fc) or as the
    Python-call list BFCL's prompt format asks for; `alter` breaks it first."""

    def __init__(self, category: str, alter=None, prompt: bool = False):
        self.entries = _entries(category)
        self.answers = _answers(category)
        self.alter = alter
        self.prompt = prompt

    def __call__(self, messages, tools=None):
        entry = _find(self.entries, messages, tools, lambda e: [f["name"] for f in e["function"]])
        calls = _calls(entry, self.answers[entry["id"]])
        if self.alter:
            calls = self.alter(calls, tools)
        if self.prompt:
            text = ", ".join(
                f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls
            )
            return {"role": "assistant", "content": f"[{text}]", "tool_calls": None}
        return _fc(calls, tools)


def wrong_value(calls, tools):
    name, args = calls[0]
    key = sorted(args)[0]
    v = args[key]
    args[key] = (
        not v if isinstance(v, bool) else v + 7919 if isinstance(v, int | float) else "zz-wrong"
    )
    return calls


def missing_required(calls, tools):
    name, args = calls[0]
    (tool,) = [t for t in tools if t["function"]["name"] == _tool_name(name, tools)]
    args.pop(tool["function"]["parameters"]["required"][0])
    return calls


def wrong_function(calls, tools):
    calls[0] = ("no_such_function", calls[0][1])
    return calls


AST = list(bfcl.AST_CATEGORIES)


@pytest.mark.parametrize("category", AST)
def test_possible_answers_score_one_and_altered_copies_zero(category):
    suite = open_suite(f"bfcl:{category}?n=6&seed=3")
    good = suite.run(AnswerResponder(category))
    assert good.meta["bfcl_eval_version"] == bfcl.BFCL_EVAL_VERSION
    assert good.meta["mode"] == "fc" and len(good.items) == 6
    assert [i.score for i in good.items] == [1.0] * 6, [i.detail for i in good.items]
    # the trivial baseline is scored by the same checker and fails most items
    assert good.baselines["first_function_empty_args"] < 0.5
    for alter in (wrong_value, missing_required, wrong_function):
        bad = suite.run(AnswerResponder(category, alter), baselines=False)
        assert [i.score for i in bad.items] == [0.0] * 6, (alter.__name__, bad.items)


def test_prompt_mode_decodes_bfcl_text_format():
    suite = open_suite("bfcl:simple_python?n=5&seed=1&mode=prompt")
    res = suite.run(AnswerResponder("simple_python", prompt=True), baselines=False)
    assert res.meta["mode"] == "prompt"
    assert [i.score for i in res.items] == [1.0] * 5, [i.detail for i in res.items]
    bad = suite.run(AnswerResponder("simple_python", wrong_value, prompt=True), baselines=False)
    assert [i.score for i in bad.items] == [0.0] * 5


@pytest.mark.parametrize("category", ["irrelevance", "live_irrelevance"])
def test_irrelevance_rewards_never_calling(category):
    suite = open_suite(f"bfcl:{category}?n=6&seed=2")
    res = suite.run(bfcl.never_call)
    assert res.score == 1.0 and res.baselines["never_call"] == 1.0
    calls = suite.run(bfcl.first_function_empty_args, baselines=False)
    assert calls.score == 0.0


def test_live_relevance_rewards_calling():
    suite = open_suite("bfcl:live_relevance?n=6&seed=2")
    res = suite.run(bfcl.first_function_empty_args)
    assert res.score == 1.0 and res.baselines["never_call"] == 0.0


class ReplayResponder:
    """multi_turn_base: at each user turn, call the turn's ground-truth functions (positional
    arguments named from the tool's schema); after the results, answer in words."""

    def __init__(self):
        self.entries = _entries("multi_turn_base")
        self.answers = _answers("multi_turn_base")

    def turns(self, messages) -> list[list[str]]:
        return self.answers[_find(self.entries, messages, None)["id"]]

    def __call__(self, messages, tools=None):
        if messages[-1]["role"] != "user":
            return {"role": "assistant", "content": "Done.", "tool_calls": None}
        users = [m for m in messages if m["role"] == "user"]
        params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        calls = []
        for text in self.turns(messages)[len(users) - 1]:
            node = ast.parse(text, mode="eval").body
            names = list(params[node.func.id]["properties"])
            args = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
            args.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
            calls.append((node.func.id, args))
        if not calls:
            return {"role": "assistant", "content": "I cannot do that.", "tool_calls": None}
        return _fc(calls, tools)


def test_multi_turn_replay_scores_one_and_doing_nothing_zero():
    suite = open_suite("bfcl:multi_turn_base?n=3&seed=5")
    res = suite.run(ReplayResponder())
    assert [i.score for i in res.items] == [1.0] * 3, [i.detail for i in res.items]
    assert res.baselines == {"never_call": 0.0}


class Batched:
    """A responder with `respond_many` (as CheckpointResponder has): records each batch size."""

    def __init__(self, inner, fail_on: str | None = None):
        self.inner, self.fail_on, self.batches = inner, fail_on, []

    def _doomed(self, messages) -> bool:
        return bool(self.fail_on) and any(m.get("content") == self.fail_on for m in messages)

    def respond_many(self, requests):
        self.batches.append(len(requests))
        if any(self._doomed(m) for m, _ in requests):
            raise RuntimeError("one turn in this batch breaks the batched call")
        return [self.inner(m, t) for m, t in requests]

    def __call__(self, messages, tools=None):
        if self._doomed(messages):
            raise RuntimeError("this turn fails")
        return self.inner(messages, tools)


def test_items_share_batched_generations():
    single = Batched(AnswerResponder("simple_python"))
    res = open_suite("bfcl:simple_python?n=6&seed=3&batch=4").run(single, baselines=False)
    assert [i.score for i in res.items] == [1.0] * 6
    assert single.batches == [4, 2]  # one round trip per batch of items
    multi = Batched(ReplayResponder())
    res = open_suite("bfcl:multi_turn_base?n=3&seed=5").run(multi, baselines=False)
    assert [i.score for i in res.items] == [1.0] * 3, [i.detail for i in res.items]
    assert max(multi.batches) == 3 and len(multi.batches) > 1  # turn by turn, all items at once


def test_a_failing_turn_in_a_batch_fails_only_its_item():
    entries = _entries("simple_python")
    ids = open_suite("bfcl:simple_python?n=4&seed=3").spec.draw([e["id"] for e in entries])
    doomed = next(e for e in entries if e["id"] == ids[1])
    words = _user_turns(doomed)[0]
    res = open_suite("bfcl:simple_python?n=4&seed=3").run(
        Batched(AnswerResponder("simple_python"), fail_on=words), baselines=False
    )
    assert [i.score for i in res.items] == [1.0, 0.0, 1.0, 1.0]
    assert "this turn fails" in res.items[1].detail["result"]


def test_result_files_in_bfcl_format(tmp_path):
    suite = open_suite(f"bfcl:parallel?n=3&seed=0&out={tmp_path}")
    res = suite.run(AnswerResponder("parallel"), baselines=False)
    (path,) = res.meta["result_files"]
    assert (
        Path(path) == tmp_path / bfcl.REGISTRY["fc"] / "non_live" / "BFCL_v4_parallel_result.json"
    )
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert [r["id"] for r in rows] == [i.id for i in res.items]
    assert all(isinstance(r["result"], list) for r in rows)


def test_a_failing_responder_fails_its_items_not_the_run():
    def broken(messages, tools=None):
        raise ConnectionError("endpoint down")

    res = open_suite("bfcl:simple_python?n=2").run(broken, baselines=False)
    assert res.score == 0.0
    assert "endpoint down" in res.items[0].detail["result"]


@pytest.mark.parametrize(
    "name, words",
    [
        ("bfcl:nope", ["nope", "simple_python"]),
        ("bfcl:simple_python?n=abc", ["n and seed"]),
        ("bfcl:simple_python?mode=chat", ["mode", "chat"]),
        ("bfcl:simple_python?bogus=1", ["bogus"]),
    ],
)
def test_bad_names_are_user_errors(name, words):
    with pytest.raises(UserError) as e:
        open_suite(name)
    assert all(w in str(e.value) for w in words)


def test_missing_interpreter_is_a_user_error(monkeypatch, tmp_path):
    monkeypatch.setenv(bfcl.PYTHON_ENV, str(tmp_path / "python"))
    with pytest.raises(UserError, match="setup-bfcl"):
        bfcl.find_python()
    assert parse_spec("bfcl:multiple?n=2&seed=4").n == 2
