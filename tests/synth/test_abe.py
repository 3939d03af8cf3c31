"""ABE: four scenarios from graph facts, tool merging, complexity scaling, deployment that
answers consistently, the F1 + correctness reward, the "abe" env through the agent loop, and
the LLM route against the replay server."""

import json
import random

import pytest

from arcforge.envs.abe_env import ABEEnv, answers_match, call_f1, deploy_tools
from arcforge.envs.registry import make_env
from arcforge.errors import UserError
from arcforge.llm import LLMClient
from arcforge.model.tokenizer import train_tokenizer
from arcforge.replay import ReplayServer
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.policies import ScriptedEngine
from arcforge.synth.abe import SCENARIOS, spec_from_graph
from arcforge.synth.abe_tools import (
    abe_expert,
    build_records,
    check_spec,
    merge_tools,
    scale,
    synthesize_abe,
)
from arcforge.synth.wkg import build_graph
from arcforge.types import Message, Task, ToolCall, Validation


@pytest.fixture(scope="module")
def graph(world):
    return build_graph(world.pages)


@pytest.fixture(scope="module")
def tasks(graph):
    return synthesize_abe(8, seed=3, graph=graph)


def test_four_scenarios_with_the_right_call_structure(tasks, world):
    ts, summary = tasks
    assert summary["kept"] == 8 and summary["merged_tools"] > 0
    assert summary["scenarios"] == {s: 2 for s in SCENARIOS}
    by = {s: [t for t in ts if t.metadata["scenario"] == s] for s in SCENARIOS}
    assert all(len(v) == 2 for v in by.values())
    for t in by["single_hop"]:
        assert [len(turn) for turn in t.metadata["turns"]] == [1]
    for t in by["parallel_single_hop"]:
        assert [len(turn) for turn in t.metadata["turns"]] == [2]  # one turn, two calls
    for t in by["multi_hop"]:
        assert len(t.metadata["turns"]) >= 2 and all(len(x) == 1 for x in t.metadata["turns"])
    for t in by["parallel_multi_hop"]:
        assert len(t.metadata["turns"]) >= 2 and all(len(x) == 2 for x in t.metadata["turns"])
    for t in ts:  # sub-answers are world facts
        for q in t.metadata["sub_questions"]:
            call = t.context["abe"]["required_calls"][t.metadata["sub_questions"].index(q)]
            entity = next(v for k, v in call["arguments"].items() if k != "field")
            assert q["answer"] in {tr.object for tr in world.kb.out[entity]}


def test_expert_solves_every_scenario_through_the_agent_loop(tasks, world):
    ts, _ = tasks
    tok = train_tokenizer([d.text for d in world.corpus()[:200]], vocab_size=400)
    engine = ScriptedEngine(tok, {t.instruction: abe_expert(t) for t in ts})
    cfg = AgentConfig(max_turns=6, max_new_tokens=400, context_budget=8192)
    trajs = run_episodes(engine, tok, lambda t: make_env(t), ts, cfg)  # registry kind "abe"
    for t, tr in zip(ts, trajs):
        assert tr.reward == 1.0, (t.instruction, tr.reward_details)
        assert tr.reward_details["f1"] == 1.0 and all(tr.reward_details["calls_valid"])
    # a policy that answers at once, without tools: correct answer at best, F1 = 0
    lazy = ScriptedEngine(
        tok, {t.instruction: [Message("assistant", f"Answer: {t.validation.answer}")] for t in ts}
    )
    trajs = run_episodes(lazy, tok, lambda t: make_env(t), ts[:2], cfg)
    assert [tr.reward for tr in trajs] == [0.5, 0.5]


def test_merge_folds_duplicate_documents_but_not_conflicting_ones(graph):
    spec = spec_from_graph(graph, random.Random(0), "single_hop")
    doc = json.loads(json.dumps(spec.tools[0]))
    spec.tools.append(doc)  # the same tool documented twice
    assert merge_tools(spec) == 1 and len(spec.tools) == 1
    twin = json.loads(json.dumps(doc))
    twin["function"]["name"] = "lookup_" + doc["function"]["name"]
    spec.tools.append(twin)
    extra = type(spec.subs[0])(
        "q9", "?", "something else", None, twin["function"]["name"], dict(spec.subs[0].arguments)
    )  # same arguments, other answer
    spec.subs.append(extra)
    assert merge_tools(spec) == 0 and len(spec.tools) == 2  # merging would give 2 answers


def test_scaling_ops_keep_the_environment_consistent(graph):
    rng = random.Random(1)
    spec = spec_from_graph(graph, rng, "parallel_single_hop")
    while spec is None or spec.subs[0].tool != spec.subs[1].tool:
        spec = spec_from_graph(graph, rng, "parallel_single_hop")
    merge_tools(spec)
    scale(spec, rng, ["generalize", "add_parameters", "generalize_types", "distractors"], graph)
    build_records(spec, graph)
    assert check_spec(spec) is None
    names = [t["function"]["name"] for t in spec.tools]
    general = next(t["function"] for t in spec.tools if t["function"]["name"].endswith("_info"))
    props = general["parameters"]["properties"]
    assert "field" in general["parameters"]["required"] and len(props["field"]["enum"]) > 1
    assert len(props) >= 3  # + at least one optional parameter
    param = next(k for k in general["parameters"]["required"] if k != "field")
    assert props[param]["type"] == ["string", "array"]
    assert len(names) > 1  # distractors
    tools = deploy_tools({"tools": spec.tools, "records": spec.records})
    a, b = (s.arguments[param] for s in spec.subs)
    field = spec.subs[0].arguments["field"]
    both = json.loads(
        tools[general["name"]].fn(**{param: [a, b], "field": field, "language": "fr"})
    )
    assert both == {a: spec.subs[0].answer, b: spec.subs[1].answer}
    assert tools[general["name"]].fn(**{param: "Nobody", "field": field}).startswith("error:")
    with pytest.raises(UserError, match="unknown ABE scaling op"):
        scale(spec, rng, ["shrink"])


def test_reward_is_call_f1_plus_answer_correctness():
    req = [{"name": "f", "arguments": {"x": "A"}}, {"name": "f", "arguments": {"x": "B"}}]
    # made: f(A), f(C), g(A) -> tp 1; precision 1/3, recall 1/2, F1 = 2*(1/6)/(5/6) = 0.4
    s = call_f1([("f", {"x": "a "}), ("f", {"x": "C"}), ("g", {"x": "A"})], req)
    assert s["matched"] == 1 and s["f1"] == pytest.approx(0.4)
    # one list call stands for two calls: f([A, B]) -> tp 2 of 2
    assert call_f1([("f", {"x": ["A", "B"]})], req)["f1"] == 1.0
    assert answers_match("Num and Vrystad", "Vrystad, Num")
    assert not answers_match("Vrystad", "Vrystad, Num")
    spec = {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {
                        "type": "object",
                        "properties": {"x": {"type": "string"}},
                        "required": ["x"],
                    },
                },
            }
        ],
        "records": [{"tool": "f", "arguments": {"x": "A"}, "result": "1"}],
        "required_calls": req[:1],
    }
    env = ABEEnv()
    env.reset(Task("t", "abe", "q", context={"abe": spec}, validation=Validation("1")))
    obs = env.step(
        Message(
            "assistant",
            "",
            tool_calls=[ToolCall("f", {"x": "A"}, "c1"), ToolCall("f", {"y": 2}, "c2")],
        )
    )
    assert obs.observations[0].content == "1"
    assert obs.observations[1].content.startswith("error:")
    env.step(Message("assistant", "Answer: 1"))
    r = env.verify()
    # precision 1/2, recall 1 -> F1 2/3; correct 1 -> (2/3 + 1) / 2
    assert r.score == pytest.approx(5 / 6) and r.details["calls_valid"] == [True, False]


DECOMP = json.dumps(
    {
        "scenario": "multi_hop",
        "question": "Where is the maker of the Zeta phone based?",
        "answer": "Oslo",
        "sub_questions": [
            {
                "id": "q1",
                "question": "Who makes the Zeta phone?",
                "answer": "Norco",
                "depends_on": None,
            },
            {"id": "q2", "question": "Where is Norco based?", "answer": "Oslo", "depends_on": "q1"},
        ],
    }
)


def _tool_doc(sub_question: str, name: str, description: str, **argument: str) -> dict:
    """One tool of a documentation reply: a function of one string parameter, and its call."""
    (param,) = argument
    schema = {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]}
    return {
        "sub_question": sub_question,
        "name": name,
        "description": description,
        "parameters": schema,
        "arguments": argument,
    }


DOCS = json.dumps(
    {
        "tools": [
            _tool_doc("q1", "get_maker", "Company that makes a product.", product="Zeta phone"),
            _tool_doc("q2", "get_company_city", "Where a company is based.", company="Norco"),
        ]
    }
)


def test_llm_route_decomposes_documents_and_deploys():
    with ReplayServer([DECOMP, DOCS], fail_first=1) as srv:
        ts, summary = synthesize_abe(
            1,
            descriptions=["Find where the Zeta phone's maker is."],
            client=LLMClient(srv.base_url, "m"),
            ops=("add_parameters", "distractors"),
            p_op=1.0,
        )
        assert len(srv.requests) == 3  # one 503 retried, then two answers
    (t,) = ts
    assert t.metadata["scenario"] == "multi_hop" and t.validation.answer == "Oslo"
    assert [[c["name"] for c in turn] for turn in t.metadata["turns"]] == [
        ["get_maker"],
        ["get_company_city"],
    ]
    assert summary["ops"] == {"add_parameters": 1, "distractors": 1}
    assert [p["step"] for p in t.metadata["provenance"]] == ["draft", "build", "check"]
    env = make_env(t)
    env.reset(t)
    for m in abe_expert(t):
        env.step(m)
    assert env.verify().score == 1.0


def test_unusable_llm_decomposition_is_dropped_with_a_clear_reason(tmp_path):
    bad = json.dumps(
        {
            "scenario": "multi_hop",
            "answer": "x",
            "sub_questions": [{"id": "q2", "question": "?", "answer": "x", "depends_on": "q7"}],
        }
    )
    with ReplayServer([bad, DECOMP, DOCS]) as srv:
        ts, summary = synthesize_abe(
            2,
            descriptions=["t", "Find the Zeta maker's city."],
            client=LLMClient(srv.base_url, "m"),
            work_dir=tmp_path,
        )
    assert len(ts) == 1 and summary["steps"]["draft"]["dropped"] == {"bad_llm_reply": 1}
    journal = [json.loads(x) for x in (tmp_path / "draft.jsonl").read_text().splitlines()]
    assert "depends on unknown 'q7'" in journal[0]["detail"]
    assert ts[0].metadata["provenance"][0] == {"step": "draft", "input": "desc-00001"}
    with pytest.raises(UserError, match="needs an LLM"):
        synthesize_abe(1, descriptions=["t"])


def test_unreachable_llm_stops_abe_after_three_failures():
    client = LLMClient("http://127.0.0.1:9", "m", max_retries=0)
    with pytest.raises(UserError, match="failed 3 times in a row"):
        synthesize_abe(5, descriptions=["a", "b", "c", "d"], client=client)
