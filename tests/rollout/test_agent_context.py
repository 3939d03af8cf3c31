"""Context management: folding and discarding long observations, and what the agent's
Trajectory keeps across a compaction."""

import pytest

from arcforge.envs.base import StepResult
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.agent import AgentConfig, episode_to_messages, run_episode
from arcforge.rollout.context import (
    ContextConfig,
    compact,
    discard_observations,
    fold,
    fold_observations,
    is_folded,
    shorten_notes,
)
from arcforge.rollout.policies import ScriptedEngine
from arcforge.types import Message, Reward, Task, Tool, ToolCall

LONG = "Report line one about the results\n" + "\n".join(f"row {i}: " + "x" * 60 for i in range(30))


def _episode(n_obs: int) -> list[Message]:
    msgs = [Message("system", "You are an agent."), Message("user", "Summarise the reports.")]
    for i in range(n_obs):
        msgs.append(
            Message(
                "assistant",
                f"note {i}",
                reasoning=f"I read report {i}. " * 20,
                tool_calls=[ToolCall("read", {"n": i})],
            )
        )
        msgs.append(Message("tool", f"[{i}] " + LONG))
    return msgs


def chars(msgs: list[Message]) -> int:
    return sum(len(m.content) + len(m.reasoning or "") for m in msgs)


def test_fold_is_one_line_with_the_folded_size():
    m = fold(Message("tool", LONG), width=20)
    assert "\n" not in m.content and is_folded(m)
    assert m.content == f"Report line one a... [folded {len(LONG)} chars]"
    assert fold(m) is m  # folding twice changes nothing
    short = Message("tool", "ok")
    assert fold(short) is short


def test_fold_keeps_the_most_recent_observations_whole():
    msgs = _episode(4)
    out = fold_observations(msgs, keep_recent=2)
    tools = [m for m in out if m.role == "tool"]
    assert [is_folded(m) for m in tools] == [True, True, False, False]
    assert tools[2].content == msgs[7].content and tools[0].content.startswith("[0] Report line")
    assert out[:2] == msgs[:2] and [m for m in out if m.role == "assistant"] == msgs[2::2]


def test_discard_and_shorten_keep_task_and_progress_notes():
    msgs = _episode(3)
    out = discard_observations(msgs, keep_recent=1)
    assert [m.role for m in out] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "tool",
    ]
    short = shorten_notes(out, note_chars=30)
    assert all(len(m.reasoning) <= 30 for m in short if m.role == "assistant")
    assert [c.name for m in short for c in m.tool_calls] == ["read"] * 3  # calls kept
    assert short[:2] == msgs[:2]


def test_compact_stops_at_the_first_stage_that_fits():
    msgs = _episode(4)  # ~4 * (2300 + 340) chars
    full = chars(msgs)
    assert compact(msgs, chars, full).stage == "none"
    folded = compact(msgs, chars, full - 4000)  # folding 2 observations saves ~4.5k
    assert folded.stage == "fold" and folded.size <= full - 4000
    discarded = compact(msgs, chars, folded.size - 50)  # the 2 folded lines are ~60 chars each
    assert discarded.stage == "discard"
    assert sum(m.role == "tool" for m in discarded.messages) == 2
    tiny = compact(msgs, chars, 800, ContextConfig(keep_recent=2, note_chars=40))
    assert tiny.stage in ("discard_recent", "drop_notes") and tiny.size <= 800
    assert tiny.messages[:2] == msgs[:2]  # the task is always kept


def test_compact_reports_when_even_the_task_does_not_fit():
    msgs = _episode(2)
    out = compact(msgs, chars, 10)
    assert out.size > 10 and out.messages == msgs[:2]


# ------------------------------------------------------------------ the agent across compaction


def read(n: int) -> str:
    """Read report n.

    Args:
        n: the report number.
    """
    return f"[{n}] " + LONG


class ReportEnv:
    def __init__(self) -> None:
        self.tools = [Tool.from_function(read)]

    def reset(self, task: Task) -> list[Message]:
        return [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        obs = [Message("tool", read(**c.arguments), name="read") for c in message.tool_calls]
        return StepResult(obs, done=not message.tool_calls)

    def verify(self) -> Reward:
        return Reward(0.0)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("budget, folded_kept", [(1100, True), (960, False)])
def test_agent_compacts_and_the_trajectory_stays_truthful(budget, folded_kept):
    tok = train_tokenizer([LONG, "Read report n. the report number", "I read report"], 400)
    task = Task("r-1", "chat", "Summarise the reports.")
    replies = [
        Message(
            "assistant",
            "",
            reasoning=f"Reading report {i}.",
            tool_calls=[ToolCall("read", {"n": i})],
        )
        for i in range(6)
    ]
    engine = ScriptedEngine(tok, {task.instruction: replies})
    cfg = AgentConfig(
        max_turns=6, max_new_tokens=96, context_budget=budget, keep_recent_observations=1
    )
    prompts: list[list[int]] = []
    gen = engine.generate
    engine.generate = lambda ps, p: (prompts.extend(ps), gen(ps, p))[1]  # record the inputs
    traj = run_episode(engine, tok, ReportEnv(), task, cfg)

    agent = traj.reward_details["agent"]
    assert traj.finish_reason == "max_turns" and agent["compactions"] >= 1
    assert all(len(p) + 96 <= budget for p in prompts)  # every prompt fitted the budget
    model = [s for s in traj.segments if s.source == "model"]
    assert traj.token_ids == prompts[-1] + model[-1].token_ids  # = final input + reply
    # sampled tokens from before the last compaction are gone from the stream, not trained
    total = sum(len(engine.reply(p)) for p in prompts)
    assert sum(traj.loss_mask) + agent["untrained_model_tokens"] == total
    assert sum(traj.loss_mask) == sum(len(s.token_ids) for s in model)
    assert agent["untrained_model_tokens"] > 0
    # the model's last view: the task and every progress note kept, the latest report whole
    seen = episode_to_messages(traj, tok)
    assert seen[0].content == task.instruction
    assert [m.reasoning for m in seen if m.role == "assistant"] == [
        f"Reading report {i}." for i in range(6)
    ]
    obs = [m for m in seen if m.role == "tool"]
    assert obs[-1].content == read(4)
    if folded_kept:  # stage 1 sufficed: older reports are one-line summaries
        assert len(obs) == 5 and all(is_folded(m) for m in obs[:-1])
        assert (
            obs[0].content == f"[0] Report line one about the results [folded {len(read(0))} chars]"
        )
    else:  # a tighter budget discarded them
        assert len(obs) == 1
    # the messages keep the whole episode
    assert [m.content for m in traj.messages if m.role == "tool"] == [read(i) for i in range(5)]
