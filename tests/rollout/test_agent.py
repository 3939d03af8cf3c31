"""The agent loop's token-in-token-out record, with a real tiny LocalEngine and scripted policies.

The tiny model is random except for a bias on the <|end|> logit (p ~ 0.27 per token), so its
replies are short junk that ends like a real reply; a test environment that never finishes
keeps the episode going until max_turns. Between turns the recording wrapper loads perturbed
weights with a new version, as an asynchronous trainer would.
"""

import json

import pytest
import torch
from tiny_models import end_biased_nano
from torch.testing import assert_close

from arcforge.chat import ThinkingConfig, render_ids
from arcforge.chat.tokens import END
from arcforge.envs.base import StepResult
from arcforge.envs.registry import env_factory, make_env
from arcforge.envs.search_env import SYSTEM_PROMPT
from arcforge.rl.losses import token_logprobs
from arcforge.rollout.agent import (
    AgentConfig,
    episode_to_messages,
    run_episode,
    run_episodes,
)
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.policies import ScriptedEngine, expert_engine
from arcforge.types import Message, Reward, Task, Tool, ToolCall, Trajectory


def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: anything.
    """
    return f"echo: {text}"


class EchoEnv:
    """Never done: every reply gets one tool observation (a stand-in for a long task)."""

    def __init__(self) -> None:
        self.tools = [Tool.from_function(echo)]
        self.steps = 0

    def reset(self, task: Task) -> list[Message]:
        return [Message("user", task.instruction)]

    def step(self, message: Message) -> StepResult:
        self.steps += 1
        return StepResult([Message("tool", f"observation {self.steps}")], done=False)

    def verify(self) -> Reward:
        return Reward(0.0, {"steps": self.steps})

    def close(self) -> None:
        pass


class Recording:
    """Forwards to an engine, records what it was fed and returned, and optionally loads a new
    weight version after every call."""

    def __init__(self, engine, states=None):
        self.engine, self.states, self.calls = engine, states or [], []

    @property
    def version(self):
        return self.engine.version

    def load_weights(self, sd, version):
        self.engine.load_weights(sd, version)

    def generate(self, prompts, params):
        outs = self.engine.generate(prompts, params)
        self.calls.append(([list(p) for p in prompts], outs))
        v = self.engine.version + 1
        if v < len(self.states):
            self.engine.load_weights(self.states[v], v)
        return outs


@pytest.fixture(scope="module")
def biased_model(tok):
    return end_biased_nano(tok).eval()


def _states(model, n):
    """n state dicts: version 0 is the model, version v adds seeded noise."""
    base = {k: v.clone() for k, v in model.state_dict().items()}
    out = [base]
    for v in range(1, n):
        g = torch.Generator().manual_seed(v)
        out.append({k: t + 0.05 * torch.randn(t.shape, generator=g) for k, t in base.items()})
    return out


def _model_spans(traj):
    """(start, end, segment) of each model segment in the flat token stream."""
    spans, pos = [], 0
    for s in traj.segments:
        if s.source == "model":
            spans.append((pos, pos + len(s.token_ids), s))
        pos += len(s.token_ids)
    return spans


def test_tito_with_local_engine_and_version_bumps(tok, biased_model):
    states = _states(biased_model, 3)
    engine = Recording(LocalEngine(biased_model, pad_token_id=tok.pad_token_id), states)
    cfg = AgentConfig(max_turns=3, max_new_tokens=40, context_budget=1024, seed=3)
    task = Task("echo-1", "chat", "Say something.")
    traj = run_episode(engine, tok, EchoEnv(), task, cfg)
    assert traj.finish_reason == "max_turns"
    ids, spans = traj.token_ids, _model_spans(traj)
    assert len(engine.calls) == 3 and len(spans) == 3
    for (prompts, outs), (a, b, seg) in zip(engine.calls, spans):
        prompt, out = prompts[0], outs[0]
        assert ids[:a] == prompt  # the stream up to each reply is exactly what was fed
        assert seg.token_ids == out.token_ids and ids[a:b] == out.token_ids
        assert seg.logprobs == out.logprobs  # the engine's, untouched
        assert out.finish_reason == "stop"
    assert ids == engine.calls[-1][0][0] + engine.calls[-1][1][0].token_ids
    # loss mask: 1 exactly on sampled tokens; only model segments carry logprobs
    model_pos = {i for a, b, _ in spans for i in range(a, b)}
    assert [i for i, m in enumerate(traj.loss_mask) if m] == sorted(model_pos)
    assert all((s.logprobs is None) == (s.source != "model") for s in traj.segments)
    # versions: one per turn, and each reply's logprobs are those of that version's weights
    assert [s.policy_version for _, _, s in spans] == [0, 1, 2]
    for a, b, seg in spans:
        biased_model.load_state_dict(states[seg.policy_version])
        with torch.no_grad():
            logits = biased_model(torch.tensor([ids[:b]])).logits[:, a - 1 : b - 1]  # (1, n, V)
        recomputed = token_logprobs(logits, torch.tensor([ids[a:b]]))[0]
        assert_close(recomputed, torch.tensor(seg.logprobs), atol=1e-4, rtol=0)
    biased_model.load_state_dict(states[0])


@pytest.mark.parametrize(
    "thinking, turn_thinking",
    [(ThinkingConfig(), None), (ThinkingConfig(preserve=True), None), (ThinkingConfig(), False)],
)
def test_tito_stream_equals_a_rerender_of_the_messages(world, tok, thinking, turn_thinking):
    task = world.tasks("tool")[0]
    env = make_env(task, world)
    cfg = AgentConfig(
        max_turns=6, context_budget=4096, thinking=thinking, turn_thinking=turn_thinking
    )
    traj = run_episode(expert_engine(tok, [task]), tok, env, task, cfg)
    assert traj.reward == 1.0 and traj.finish_reason == "answer"
    enc = render_ids(traj.messages, tok, tools=env.tools, thinking=thinking)
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert enc.input_ids == traj.token_ids + newline  # the render closes with "<|end|>\n"
    assert enc.loss_mask[: len(traj.loss_mask)] == traj.loss_mask
    if turn_thinking is False:
        assert all(m.reasoning is None for m in traj.messages if m.role == "assistant")
        assert traj.messages[0].thinking is False
    # the token stream parsed back gives the same conversation
    back = episode_to_messages(traj, tok)
    key = [
        (m.role, m.content, m.reasoning, [(c.name, c.arguments) for c in m.tool_calls])
        for m in traj.messages
    ]
    assert [
        (m.role, m.content, m.reasoning, [(c.name, c.arguments) for c in m.tool_calls])
        for m in back
    ] == key


def test_trajectory_round_trips_through_json(world, tok):
    task = world.tasks("search")[0]
    traj = run_episode(
        expert_engine(tok, [task]),
        tok,
        make_env(task, world),
        task,
        AgentConfig(max_turns=10, context_budget=8192),
    )
    assert traj.reward == 1.0
    again = Trajectory.from_dict(json.loads(json.dumps(traj.to_dict())))
    assert again == traj
    seen = episode_to_messages(traj, tok)  # the system text comes back without the tools section
    assert (seen[0].role, seen[0].content) == ("system", SYSTEM_PROMPT)
    assert [m.content for m in seen[1:]] == [m.content for m in traj.messages[1:]]


def _script_env(tok, replies, max_new_tokens=64, budget=2048, max_turns=4):
    task = Task("e-1", "chat", "Use the echo tool.")
    engine = ScriptedEngine(tok, {task.instruction: replies})
    cfg = AgentConfig(max_turns=max_turns, max_new_tokens=max_new_tokens, context_budget=budget)
    env = EchoEnv()
    return run_episode(engine, tok, env, task, cfg), env


def test_malformed_calls_become_error_observations(tok):
    broken = Message("assistant", '<tool_call>{"name": "echo", "arguments": {"text": ')
    ok = Message("assistant", "", tool_calls=[ToolCall("echo", {"text": "hi"})])
    traj, env = _script_env(tok, [broken, ok], max_turns=2)
    roles = [m.role for m in traj.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    err = traj.messages[2]
    assert err.content.startswith("error: tool call 1: unclosed <tool_call>")
    assert traj.messages[1].train is False and traj.messages[3].train is True
    assert env.steps == 1  # the broken reply was not an action
    assert traj.finish_reason == "max_turns"
    assert traj.reward_details["agent"]["parse_errors"] == 1


def test_reply_cut_by_max_new_tokens_finishes_with_length(tok):
    long = Message("assistant", "word " * 50, reasoning="")
    traj, env = _script_env(tok, [long], max_new_tokens=12)
    assert traj.finish_reason == "length"
    (seg,) = [s for s in traj.segments if s.source == "model"]
    assert len(seg.token_ids) == 12 and END not in tok.decode(seg.token_ids)
    assert env.steps == 0 and traj.messages[-1].train is False


def test_prompt_over_budget_finishes_with_context(tok):
    traj, _ = _script_env(tok, [Message("assistant", "hi")], max_new_tokens=16, budget=40)
    assert traj.finish_reason == "context"
    assert not any(s.source == "model" for s in traj.segments)


def test_batched_groups_one_generate_call_per_turn(world, tok):
    tasks = world.tasks("tool")[:2] + world.tasks("reasoning")[:1]
    engine = Recording(expert_engine(tok, tasks))
    trajs = run_episodes(
        engine, tok, env_factory(world), tasks, AgentConfig(max_turns=6), group_size=3
    )
    assert [t.group_id for t in trajs] == [t.id for t in tasks for _ in range(3)]
    assert all(t.reward == 1.0 for t in trajs)
    turns = [t.reward_details["agent"]["turns"] for t in trajs]
    assert len(engine.calls) == max(turns)  # every turn is one batched call
    assert [len(p) for p, _ in engine.calls] == [
        sum(n > k for n in turns) for k in range(max(turns))
    ]
