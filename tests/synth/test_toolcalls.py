"""Procedural function-calling tasks: many distinct schemas, gold calls that validate, questions
that state every value, ABE deployment and reward (irrelevance included), SFT records that
render through SmolLM2's own chat template, and the synth stage's toolcalls/ output."""

from __future__ import annotations

import json
import re

import pytest

from arcforge.chat.validate import validate_call
from arcforge.data.sources import load_records, record_from_dict
from arcforge.envs.abe_env import ABEEnv
from arcforge.envs.registry import make_env
from arcforge.errors import UserError
from arcforge.synth.toolcalls import (
    CATEGORIES,
    allocate,
    catalog,
    name_space,
    phrase,
    synthesize_toolcalls,
    value_text,
)
from arcforge.types import Message, Task, Tool, ToolCall

NAME = re.compile(r"^([a-z_]+\.)?[a-z][a-z0-9_]*$")


@pytest.fixture(scope="module")
def synth():
    return synthesize_toolcalls(1000, seed=0)


def _tools(task: Task) -> dict[str, Tool]:
    fns = [s["function"] for s in task.context["abe"]["tools"]]
    return {f["name"]: Tool(f["name"], f["description"], f["parameters"]) for f in fns}


def test_deterministic_in_the_seed():
    a = synthesize_toolcalls(40, seed=3)
    b = synthesize_toolcalls(40, seed=3)
    assert [t.to_dict() for t in a[0]] == [t.to_dict() for t in b[0]] and a[1:] == b[1:]
    other = synthesize_toolcalls(40, seed=4)[0]
    assert [t.instruction for t in other] != [t.instruction for t in a[0]]


def test_many_distinct_names_in_every_category(synth):
    tasks, records, summary = synth
    assert summary["categories"] == {c: 200 for c in CATEGORIES}
    assert summary["distinct_function_names"] >= 500 and summary["domains"] >= 20
    assert len(name_space()) >= 2000
    names = {n for t in tasks for n in t.tools}
    assert all(NAME.match(n) for n in names)
    assert any("." in n for n in names) and any("." not in n for n in names)  # both styles
    keys = [(tuple(sorted(t.tools)), t.instruction) for t in tasks]
    assert len(set(keys)) == len(keys)  # no duplicate (function set, question)
    assert 0.25 < summary["optional_arguments"] / summary["optional_possible"] < 0.55
    types = {
        p.get("type")
        for t in tasks
        for s in t.context["abe"]["tools"]
        for p in s["function"]["parameters"]["properties"].values()
    }
    assert {"integer", "number", "string", "boolean", "array"} <= types


def test_structures_and_gold_calls_validate(synth):
    tasks, _, _ = synth
    for t in tasks:
        cat, abe = t.metadata["toolcall_category"], t.context["abe"]
        calls, tools = abe["required_calls"], _tools(t)
        called = {c["name"] for c in calls}
        n_tools, n_calls = len(tools), len(calls)
        assert {
            "simple": n_tools == 1 and n_calls == 1,
            "multiple": 2 <= n_tools <= 4 and n_calls == 1,
            "parallel": n_tools == 1 and 2 <= n_calls <= 4,
            "parallel_multiple": 2 <= n_tools <= 4 and 2 <= n_calls <= 4 and len(called) >= 2,
            "irrelevance": 1 <= n_tools <= 3 and n_calls == 0,
        }[cat], (cat, t.instruction, calls)
        if cat == "multiple":
            assert len(t.metadata["domains"]) == n_tools  # one function per domain
        for c in calls:
            assert validate_call(ToolCall(c["name"], c["arguments"]), tools) is None, c
            params = tools[c["name"]].parameters
            assert set(params["required"]) <= set(c["arguments"])
        if cat in ("parallel", "parallel_multiple"):  # each call its own values
            assert len({json.dumps(c, sort_keys=True) for c in calls}) == n_calls
        for tool in tools.values():
            props, req = tool.parameters["properties"], tool.parameters["required"]
            assert all("default" in props[k]["description"].lower() for k in props if k not in req)
            assert tool.description.endswith((".", ")"))


def test_question_states_every_argument_value(synth):
    tasks, _, _ = synth
    flags = {p.description: p for p in catalog().params.values() if p.kind == "bool"}
    for t in tasks:
        tools = _tools(t)
        for c in t.context["abe"]["required_calls"]:
            props = tools[c["name"]].parameters["properties"]
            for k, v in c["arguments"].items():
                if isinstance(v, bool):
                    desc = props[k]["description"]
                    p = next(p for d, p in flags.items() if desc.startswith(d))
                    assert phrase(p, v) in t.instruction, (t.instruction, k, v)
                    continue
                for x in v if isinstance(v, list) else [v]:
                    assert value_text(x) in t.instruction, (t.instruction, k, x)
                if isinstance(v, float):
                    assert 1 <= len(str(v).split(".")[1]) <= 2 and not v.is_integer()


def _replay(task: Task, record: dict) -> tuple[float, list[list[str]]]:
    """Step the task's ABE env with the record's assistant turns: (reward, observations)."""
    env = ABEEnv()
    env.reset(task)
    seen = []
    for m in record["messages"]:
        if m["role"] == "assistant":
            seen.append([o.content for o in env.step(Message.from_dict(m)).observations])
    return env.verify().score, seen


def test_expert_episode_earns_full_reward_and_wrong_arguments_less(synth):
    tasks, records, _ = synth
    for t, r in zip(tasks, records):
        score, seen = _replay(t, r)
        assert score == 1.0, (t.instruction, r["messages"])
        results = [x["result"] for x in t.context["abe"]["records"]]
        assert (seen[0] if results else []) == results  # each gold call gets its record
    lists = [
        v
        for t in tasks
        for c in t.context["abe"]["required_calls"]
        for v in c["arguments"].values()
    ]
    assert any(isinstance(v, list) for v in lists)  # array arguments were among them
    for t, r in [(t, r) for t, r in zip(tasks, records) if t.context["abe"]["required_calls"]][:60]:
        bad = json.loads(json.dumps(r))
        args = bad["messages"][1]["tool_calls"][0]["arguments"]
        key = next(iter(args))
        v = args[key]
        args[key] = (
            (not v)
            if isinstance(v, bool)
            else v + 1
            if isinstance(v, int | float)
            else v[:-1]
            if isinstance(v, list)
            else v + "x"
        )
        score, seen = _replay(t, bad)
        assert score < 1.0 and "error" in seen[0][0], (t.instruction, args)
    t = tasks[0]
    assert type(make_env(t)).__name__ == "ABEEnv"  # the registry's "abe" kind


def test_irrelevance_rewards_the_reply_without_a_call(synth):
    tasks, records, _ = synth
    irr = [
        (t, r) for t, r in zip(tasks, records) if t.metadata["toolcall_category"] == "irrelevance"
    ]
    for t, r in irr[:20]:
        assert [m["role"] for m in r["messages"]] == ["user", "assistant"]
        assert "tool_calls" not in r["messages"][1]
        env = ABEEnv()
        env.reset(t)
        env.step(Message("assistant", "I cannot help with that."))  # any text, no call
        assert env.verify().score == 1.0
        env.reset(t)
        name, fn = next(iter(_tools(t).items()))
        env.step(Message("assistant", "", tool_calls=[ToolCall(name, {}, "c0")]))
        env.step(Message("assistant", str(t.validation.answer)))
        assert env.verify().score == 0.0


def test_sft_records_hold_the_gold_calls_in_one_turn(synth):
    tasks, records, _ = synth
    for t, r in zip(tasks, records):
        rec = record_from_dict(json.loads(json.dumps(r)), "mem")
        assert rec.meta["tool_schemas"] == t.context["abe"]["tools"]
        assert rec.meta["toolcall_category"] == t.metadata["toolcall_category"]
        gold = [(c["name"], c["arguments"]) for c in t.context["abe"]["required_calls"]]
        msgs = rec.messages
        assert msgs[0].role == "user" and msgs[0].content == t.instruction
        if not gold:
            assert len(msgs) == 2 and msgs[1].content and not msgs[1].tool_calls
            continue
        assert [(c.name, c.arguments) for c in msgs[1].tool_calls] == gold
        assert [m.role for m in msgs[2:-1]] == ["tool"] * len(gold)
        assert msgs[-1].content == f"Answer: {t.validation.answer}"


def test_category_shares_follow_the_weights():
    assert allocate(8, ("simple", "irrelevance"), {"simple": 3, "irrelevance": 1}) == {
        "simple": 6,
        "irrelevance": 2,
    }
    assert sum(allocate(7, CATEGORIES, None).values()) == 7
    tasks, _, summary = synthesize_toolcalls(10, 1, ("parallel",), None)
    assert summary["categories"] == {"parallel": 10}
    with pytest.raises(UserError, match="unknown tool-call categories"):
        allocate(4, ("simple", "bogus"), None)
    with pytest.raises(UserError, match="sum to > 0"):
        allocate(4, ("simple",), {"simple": 0})


def test_record_renders_through_smollm2_chat_template(synth):
    """SmolLM2-135M-Instruct's own template (native format, Hermes dialect) trains on the
    assistant's <tool_call> blocks."""
    from arcforge.model.importer import real_checkpoint
    from arcforge.model.tokenizer import load_tokenizer
    from arcforge.stages.sft import _tools as record_tools
    from arcforge.train.sft import Conversation, encode_conversations

    try:
        path = real_checkpoint("smollm2-135m-instruct")
    except UserError as e:
        pytest.skip(f"no SmolLM2 checkpoint: {e}")
    tok, added = load_tokenizer(path, chat_format="native")
    assert added == 0
    tasks, records, _ = synth
    r = next(r for r in records if r["toolcall_category"] == "parallel_multiple")
    conv = Conversation(
        [Message.from_dict(m) for m in r["messages"]], record_tools(r["tool_schemas"], "t")
    )
    examples, counts = encode_conversations([conv], tok, 4096)
    assert counts["kept"] >= 1 and counts["truncated"] == 0
    ex = examples[0]
    trained = tok.decode([i for i, m in zip(ex.input_ids, ex.loss_mask) if m])
    calls = r["messages"][1]["tool_calls"]
    assert trained.count("<tool_call>") == len(calls)
    for c in calls:
        assert json.dumps(c["name"]) in trained
    assert r["messages"][0]["content"] not in trained  # the user turn is masked
    assert "<tools>" in tok.decode(ex.input_ids)  # the schemas are in the prompt


def test_every_trained_turn_ends_with_its_stop_token(synth):
    """A tool-call turn is trained through the stop token that ends it, also when `max_len`
    cuts the conversation: the turn the cut falls in is left untrained, since trained it
    would teach a reply that never stops."""
    from arcforge.model.importer import real_checkpoint
    from arcforge.model.tokenizer import load_tokenizer
    from arcforge.stages.sft import _tools as record_tools
    from arcforge.train.sft import Conversation, encode_conversations

    try:
        path = real_checkpoint("smollm2-135m-instruct")
    except UserError as e:
        pytest.skip(f"no SmolLM2 checkpoint: {e}")
    tok, _ = load_tokenizer(path, chat_format="native")
    stops = set(tok.arcforge_chat_format.stop_ids())
    _, records, _ = synth
    convs = [
        Conversation(
            [Message.from_dict(m) for m in r["messages"]], record_tools(r["tool_schemas"], "t")
        )
        for r in records[:24]
    ]
    full, _ = encode_conversations(convs, tok, 4096)
    cut_at = sorted(len(e.input_ids) for e in full)[len(full) // 2]  # cuts about half of them
    for max_len, ex_list in ((4096, full), (cut_at, encode_conversations(convs, tok, cut_at)[0])):
        runs = []
        for ex in ex_list:
            run: list[int] = []
            for i, m in zip(ex.input_ids, ex.loss_mask):
                if m:
                    run.append(i)
                elif run:
                    runs.append(run)
                    run = []
            if run:
                runs.append(run)
        assert runs, max_len
        assert all(r[-1] in stops for r in runs), max_len
    _, counts = encode_conversations(convs, tok, cut_at)
    assert counts["truncated"] > 0 and counts["cut_turns_untrained"] > 0


def test_synth_stage_writes_toolcalls(tmp_path):
    import arcforge.stages  # noqa: F401  (registers the stage kinds)
    from arcforge.pipeline import RunContext, run_stage
    from arcforge.run_config import parse_config

    stage = {
        "name": "synth",
        "kind": "synth",
        "swe_repos": 0,
        "toolcalls": 12,
        "toolcalls_weights": {"simple": 1, "parallel": 1, "irrelevance": 1},
    }
    cfg = parse_config({"name": "t", "world": {"seed": 3, "scale": 0.1}, "stages": [stage]})
    summary = run_stage(RunContext(cfg, tmp_path), cfg.stages[0])
    out = tmp_path / "synth" / "toolcalls"
    assert summary["toolcalls"]["categories"] == {"simple": 4, "parallel": 4, "irrelevance": 4}
    assert json.loads((out / "summary.json").read_text()) == summary["toolcalls"]
    tasks = load_records(f"jsonl:{out / 'tasks.jsonl'}")
    assert len(tasks) == 12 and all(r.task is not None and r.task.kind == "abe" for r in tasks)
    sft = load_records(f"jsonl:{out / 'sft.jsonl'}")
    assert len(sft) == 12 and all(r.messages and r.meta["tool_schemas"] for r in sft)
