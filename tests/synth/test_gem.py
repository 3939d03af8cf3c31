"""GEM: text filter, workflow + tool extraction, trajectory generation, refinement and schema
validation; the rule route on the world's texts and the LLM route against the replay server."""

import json

import pytest

from arcforge.errors import UserError
from arcforge.llm import LLMClient
from arcforge.replay import ReplayServer
from arcforge.synth.gem import (
    GemItem,
    extract_rules,
    generate_rules,
    is_procedure,
    refine_rules,
    validate_trajectory,
)
from arcforge.synth.gem_llm import synthesize_gem
from arcforge.types import Message, ToolCall

MATH = (
    "Question: Yiatel plants 393 seeds. Birds eat 160. Each remaining seed becomes 5 seeds. "
    "How many seeds are there?\nSolution: 3 - 0 = 3, 9 - 6 = 3, 3 - 1 = 2, so 393 - 160 = "
    "233. 3 * 5 = 15, 3 * 5 + 1 = 16, 2 * 5 + 1 = 11, so 233 * 5 = 1165.\nAnswer: 1165"
)
HOWTO = (
    "How to repot a plant\n1. Water the plant a day before.\n2. Remove it from the old pot."
    "\n3. Add 2 cups of 'fresh soil' to the new pot.\n4. Place the plant."
)
PROSE = "Vrystad is located in Hooeiia. Vrystad has a population of 823000."


def test_filter_keeps_procedures_only():
    assert is_procedure(MATH) and is_procedure(HOWTO)
    assert not is_procedure(PROSE)
    assert not is_procedure("Question: ...\nSolution: 4 * 6 = 24.\nAnswer: 24")  # one step
    assert not is_procedure("Solution: 2 + 2 = 5, so 5 * 2 = 10.")  # the first step is wrong


def test_math_text_becomes_a_calculator_trajectory_with_real_results():
    item = GemItem("m", MATH)
    assert extract_rules(item)
    assert [s["arguments"]["expression"] for s in item.steps] == ["393 - 160", "233 * 5"]
    generate_rules(item)
    roles = [m.role for m in item.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m.content for m in item.messages if m.role == "tool"] == ["233", "1165"]
    assert item.messages[-1].content == "Answer: 1165"
    refine_rules(item)
    # the second call uses the first result (233): no parallel fold; responses become JSON
    assert "parallel_calls" not in item.refinements
    assert json.loads(item.messages[3].content)["result"] == "233"
    assert validate_trajectory(item.messages, item.tools) == []


def test_step_list_becomes_tools_and_refinement_parallelizes_and_hides_steps():
    item = GemItem("h", HOWTO)
    assert extract_rules(item)
    add = next(s for s in item.steps if s["tool"] == "add_cups")
    assert add["arguments"] == {
        "target": "2 cups of 'fresh soil' to the new pot",
        "value": "fresh soil",
        "amount": 2,
    }
    generate_rules(item)
    n_calls = sum(len(m.tool_calls) for m in item.messages)
    refine_rules(item)
    turns = [m for m in item.messages if m.tool_calls]
    assert sum(len(m.tool_calls) for m in turns) == n_calls == 4
    assert [len(m.tool_calls) for m in turns] == [2, 2]  # independent steps folded in pairs
    assert "1. Water" not in item.messages[1].content  # the request no longer lists the steps
    assert item.refinements == ["parallel_calls", "realistic_responses", "harder_request"]
    assert validate_trajectory(item.messages, item.tools) == []


def test_validation_names_every_problem():
    item = GemItem("m", MATH)
    extract_rules(item)
    generate_rules(item)
    msgs = list(item.messages)
    msgs[2] = Message("assistant", "", tool_calls=[ToolCall("calculator", {"expr": 1}, "call-0")])
    msgs[4] = Message("assistant", "", tool_calls=[ToolCall("search", {"q": "x"}, "call-9")])
    problems = validate_trajectory(msgs[:-1], item.tools)
    text = "\n".join(problems)
    assert 'missing required argument "expression"' in text
    assert 'unknown tool "search"' in text
    assert "unknown call 'call-1'" in text  # the old response no longer matches a call
    assert "must end with an assistant answer" in text


def test_rule_route_on_world_texts_counts_every_reason():
    texts = [("m", MATH), ("h", HOWTO), ("p", PROSE)]
    records, summary = synthesize_gem(texts)
    assert summary["kept"] == 2 and summary["steps"]["filter"]["dropped"] == {"not_procedure": 1}
    assert [r["id"] for r in records] == ["m", "h"] and records[0]["source"] == "gem:rule:math"
    steps = ["filter", "extract", "generate", "refine", "validate"]
    assert [p["step"] for p in records[0]["provenance"]] == steps
    assert records[0]["tools"] == ["calculator"]
    assert all(
        validate_trajectory([Message.from_dict(m) for m in r["messages"]], r["tool_schemas"]) == []
        for r in records
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_room",
            "description": "Book a room.",
            "parameters": {
                "type": "object",
                "properties": {"hotel": {"type": "string"}, "nights": {"type": "integer"}},
                "required": ["hotel", "nights"],
            },
        },
    },
    {
        "name": "pay",
        "description": "Pay a booking.",
        "parameters": {
            "type": "object",
            "properties": {"booking_id": {"type": "string"}},
            "required": ["booking_id"],
        },
    },
]
TRAJ = {
    "messages": [
        {"role": "system", "content": "You book trips."},
        {"role": "user", "content": "Book 2 nights at Hotel Num and pay."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {
                        "name": "book_room",
                        "arguments": '{"hotel": "Hotel Num", "nights": 2}',
                    },
                }
            ],
        },
        {"role": "tool", "content": '{"booking_id": "B-17"}'},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "pay", "arguments": {"booking_id": "B-17"}}],
        },
        {"role": "tool", "content": '{"status": "paid"}'},
        {"role": "assistant", "content": "Booked and paid (B-17)."},
    ]
}


def _llm(refined_nights):
    """A scripted model answering by the stage prompt (filter, extract, generate, refine)."""

    def reply(messages):
        system = messages[0]["content"]
        if system.startswith("Does the text"):
            return json.dumps({"multi_step": "Book" in messages[1]["content"]})
        if system.startswith("Extract"):
            return json.dumps({"goal": "book and pay", "workflow": ["book", "pay"], "tools": TOOLS})
        if system.startswith("Write"):
            return "```json\n" + json.dumps(TRAJ) + "\n```"
        t = json.loads(json.dumps(TRAJ))
        t["messages"][1]["content"] = "Sort out my stay at Hotel Num."
        t["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps(
            {"hotel": "Hotel Num", "nights": refined_nights}
        )
        return json.dumps(t)

    return reply


def test_llm_route_end_to_end_over_http():
    texts = [
        ("t1", "Book the hotel. Then pay for it. Finally send the receipt."),
        ("t2", "A poem about rain."),
    ]
    with ReplayServer(_llm(3)) as srv:
        records, summary = synthesize_gem(texts, LLMClient(srv.base_url, "m"))
        assert len(srv.requests) == 5  # t1: 4 stages, t2: the filter only
    assert summary["kept"] == 1 and summary["steps"]["filter"]["dropped"] == {"not_procedure": 1}
    (rec,) = records
    assert rec["source"] == "gem:llm:text" and rec["refinements"] == ["llm_refine"]
    assert rec["messages"][1]["content"] == "Sort out my stay at Hotel Num."
    tool_msgs = [m for m in rec["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["a", "call-1"]  # ids linked in order


def test_llm_trajectory_breaking_the_schema_is_dropped():
    with ReplayServer(_llm("three")) as srv:  # nights must be an integer
        records, summary = synthesize_gem(
            [("t1", "Book it. Then pay. Finally go.")], LLMClient(srv.base_url, "m")
        )
    assert records == [] and summary["steps"]["validate"]["dropped"] == {"invalid_trajectory": 1}


def test_unreachable_llm_aborts_with_one_clear_error():
    client = LLMClient("http://127.0.0.1:9", "m", max_retries=0)
    with pytest.raises(UserError, match="failed 3 times in a row"):
        synthesize_gem([(str(i), "Book it.") for i in range(5)], client)


def test_garbage_llm_replies_are_dropped_not_fatal(tmp_path):
    with ReplayServer(lambda msgs: "Sure! Here you go: the answer is yes") as srv:
        records, summary = synthesize_gem(
            [("a", "x"), ("b", "y"), ("c", "z"), ("d", "w")],
            LLMClient(srv.base_url, "m"),
            work_dir=tmp_path,
        )
        assert len(srv.requests) == 8  # each text: one ask + one repair turn
    assert records == [] and summary["steps"]["filter"]["dropped"] == {"bad_llm_reply": 4}
    journal = [json.loads(x) for x in (tmp_path / "filter.jsonl").read_text().splitlines()]
    assert "no parsable JSON" in journal[0]["detail"]


def test_gem_records_feed_the_sft_stage_with_their_schemas(tmp_path):
    from arcforge.pipeline import RunContext
    from arcforge.run_config import RunCfg
    from arcforge.stages.sft import SFTStageCfg, _conversations
    from arcforge.world import WorldConfig, build_world

    records, _ = synthesize_gem([("m", MATH), ("h", HOWTO)])
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    stage = SFTStageCfg(name="sft", kind="sft", sources=[{"source": f"jsonl:{path}"}])

    world = build_world(WorldConfig(seed=7, scale=0.1))
    ctx = RunContext(RunCfg(name="t", world={"seed": 7, "scale": 0.1}), tmp_path, _world=world)
    convs = _conversations(ctx, stage)
    assert [[t.name for t in c.tools] for c in convs] == [r["tools"] for r in records]
    assert (
        convs[0].tools[0].parameters
        == records[0]["tool_schemas"][0].get("function", records[0]["tool_schemas"][0])[
            "parameters"
        ]
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**records[0], "tool_schemas": [{"description": "x"}]}) + "\n")
    with pytest.raises(UserError, match="needs a 'name'"):
        _conversations(ctx, SFTStageCfg(name="s", kind="sft", sources=[{"source": f"jsonl:{bad}"}]))
