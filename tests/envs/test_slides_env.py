"""SlidesEnv through the env registry: one turn, the deck rendered in real Chromium."""

import random

import pytest

from arcforge.browser import browser_missing
from arcforge.envs.registry import make_env
from arcforge.envs.slides import SlidesEnv
from arcforge.types import Message, Task
from arcforge.world.knowledge.kb import build_kb
from arcforge.world.knowledge.names import NameBank
from arcforge.world.tasks.slide_decks import reference_deck, slides_tasks


def _task() -> Task:
    rng = random.Random(1)
    return slides_tasks(build_kb(rng, NameBank(rng), 60, 12, 12, 30, 0.0), 1, 0, seed=4)[0][0]


def test_registry_makes_a_slides_env_and_rejects_other_tasks():
    task = _task()
    env = make_env(task)
    assert isinstance(env, SlidesEnv)
    msgs = env.reset(task)
    assert msgs[-1].role == "user" and msgs[-1].content == task.instruction
    with pytest.raises(ValueError, match="needs a slides task"):
        env.reset(Task("x", "math", "1+1?"))


def test_empty_reply_scores_zero_without_a_browser():
    task = _task()
    env = make_env(task)
    env.reset(task)
    assert env.step(Message("assistant", "")).done
    assert env.verify().score == 0.0


@pytest.mark.skipif(browser_missing() is not None, reason=f"needs a browser: {browser_missing()}")
def test_reference_deck_episode_scores_high():
    task = _task()
    env = make_env(task)
    env.reset(task)
    deck = reference_deck(task)
    assert env.step(Message("assistant", f"Here is the deck:\n```html\n{deck}```")).done
    reward = env.verify()
    assert reward.score >= 0.95, reward.details
    assert reward.details["n_slides"] == len(task.context["outline"])
