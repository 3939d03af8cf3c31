"""SFT demos: real tool outputs, thinking modes, and correction episodes masked correctly."""

from arcforge.world import WorldConfig, build_world
from arcforge.world.world_config import DemoCounts


def test_tool_messages_are_real_tool_outputs(world):
    tools = world.tools()
    for demo in world.sft_demos():
        if not demo.kind.startswith("tool"):
            continue
        calls = {}
        for m in demo.messages:
            for c in m.tool_calls:
                calls[c.id] = c
            if m.role == "tool":
                c = calls[m.tool_call_id]
                assert m.content == tools[c.name].fn(**c.arguments)


def test_correction_demos_mask_exactly_the_wrong_step(world):
    demos = [d for d in world.sft_demos() if d.kind == "tool_correction"]
    assert demos
    for d in demos:
        masked = [i for i, m in enumerate(d.messages) if not m.train]
        assert len(masked) == 1
        i = masked[0]
        wrong = d.messages[i]
        assert wrong.role == "assistant" and wrong.tool_calls
        assert d.messages[i + 1].role == "tool" and d.messages[i + 1].content.startswith("error:")
        retry = d.messages[i + 2]
        assert (
            retry.train and retry.tool_calls and not d.messages[i + 3].content.startswith("error:")
        )


def test_modes_and_turn_level_thinking(world):
    demos = world.sft_demos()
    assert {"interleaved", "preserved", "dropped", "turn_level"} <= {d.mode for d in demos}
    for d in demos:
        thinking = None
        for m in d.messages:
            if m.role == "user":
                thinking = m.thinking
            elif m.role == "assistant":
                # a turn switched off has no reasoning; otherwise every assistant step reasons
                assert (m.reasoning is None) == (thinking is False), (d.id, m)
        if d.mode in ("preserved", "dropped", "turn_level") and d.kind == "tool":
            assert sum(m.role == "user" for m in d.messages) == 2


def test_answers_match_tasks(world):
    tasks = {t.id: t for s in ("reasoning", "tool") for t in world.tasks(s, "train")}
    for d in world.sft_demos():
        if d.kind in ("reasoning", "tool", "tool_correction") and d.task_id in tasks:
            finals = [m for m in d.messages if m.role == "assistant" and not m.tool_calls]
            assert finals[0].content == f"Answer: {tasks[d.task_id].validation.answer}"


def test_demo_counts_are_configurable():
    one_each = dict.fromkeys(["chat", "code", "terminal", "swe"], 1)
    counts = DemoCounts(reasoning=3, reasoning_no_think=2, tool=4, tool_correction=2, **one_each)
    w = build_world(WorldConfig(seed=5, scale=0.05, demos=counts))
    # scale 0.05 shrinks counts but never below 1 per kind
    kinds = [d.kind for d in w.sft_demos()]
    assert kinds.count("reasoning") == 2 and kinds.count("tool") == 1
    assert {"chat", "code", "terminal", "swe", "tool_correction"} <= set(kinds)
