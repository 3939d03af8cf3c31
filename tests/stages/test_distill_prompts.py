"""Distillation prompts of agent tasks are the agent loop's first model input."""

from __future__ import annotations

import pytest

from arcforge.chat.tokens import END
from arcforge.data.sources import Record
from arcforge.envs.registry import env_factory
from arcforge.errors import UserError
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.agent import AgentConfig, run_episodes
from arcforge.rollout.engines.local import LocalEngine
from arcforge.stages.distill import teacher_prompts
from arcforge.types import Task, Validation
from arcforge.world import WorldConfig, build_world


@pytest.fixture(scope="module")
def setup():
    world = build_world(WorldConfig(seed=7, scale=0.1))
    tok = train_tokenizer([d.text for d in world.corpus()[:200]], vocab_size=400)
    return world, tok


def loop_prompt(world, tok, task: Task) -> list[int]:
    """What run_episodes fed the engine before its first reply."""
    model = init_model(build_config("nano", len(tok), 2048), seed=0)
    eng = LocalEngine(model, pad_token_id=tok.pad_token_id)
    cfg = AgentConfig(max_turns=1, max_new_tokens=1, context_budget=2048, temperature=0.0)
    (traj,) = run_episodes(eng, tok, env_factory(world), [task], cfg)
    first_model = next(i for i, s in enumerate(traj.segments) if s.source == "model")
    return [t for s in traj.segments[:first_model] for t in s.token_ids]


@pytest.mark.parametrize("suite", ["tir", "tool"])
def test_an_agent_task_is_prompted_as_its_episode_opens(setup, suite):
    world, tok = setup
    task = world.tasks(suite, "train")[0]
    (p,) = teacher_prompts([Record(prompt=task.instruction, task=task)], tok, True, world)
    assert p.ids == loop_prompt(world, tok, task)
    text = tok.decode(p.ids, skip_special_tokens=False)
    want = "python" if suite == "tir" else "lookup"
    assert f'"name": "{want}"' in text and not text.endswith(END)


def test_math_and_chat_prompts_stay_one_user_turn(setup):
    world, tok = setup
    math = world.tasks("reasoning", "train")[0]
    chat = world.tasks("chat", "train")[0]
    ps = teacher_prompts(
        [Record(prompt=t.instruction, task=t) for t in (math, chat)], tok, True, world
    )
    for p, t in zip(ps, (math, chat)):
        text = tok.decode(p.ids, skip_special_tokens=False)
        assert t.instruction in text and '"name":' not in text


def test_a_task_its_environment_cannot_open_is_named(setup):
    world, tok = setup
    bad = Task("tool-bad", "tool", "Who?", tools=["teleport"], validation=Validation(answer="x"))
    with pytest.raises(UserError, match="src:1: task tool-bad asks for tool"):
        teacher_prompts([Record(prompt="Who?", task=bad, origin="src:1")], tok, True, world)
