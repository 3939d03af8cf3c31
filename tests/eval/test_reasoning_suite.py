"""The reasoning suites: `reasoning` is avg@k over seeded samples, `reasoning_greedy` one greedy
reply; both grade held-out word problems with math-verify."""

from __future__ import annotations

import pytest

from arcforge.config import EvalCfg
from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.policies import GarbageEngine, expert_engine


@pytest.fixture(scope="module")
def model(tok):
    return init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=1024), 0)


@pytest.mark.parametrize("suite", ["reasoning", "reasoning_greedy"])
def test_expert_scores_one_and_garbage_zero(world, tok, model, suite):
    cfg = EvalCfg(suites=[suite], n=4, samples=3, max_new_tokens=200)
    tasks = world.tasks("reasoning", "test")
    out = SUITES[suite](Evaluator(model, tok, expert_engine(tok, tasks), world), cfg)
    assert out.scores == [1.0] * 4, out.examples
    out = SUITES[suite](Evaluator(model, tok, GarbageEngine(tok, seed=3), world), cfg)
    assert out.scores == [0.0] * 4


def test_sampled_replies_are_seeded_and_differ_within_a_task(world, tok, model):
    ev = Evaluator(model, tok, LocalEngine(model, pad_token_id=tok.pad_token_id or 0), world)
    tasks = world.tasks("reasoning", "test")[:2]
    a = ev.chat(tasks, 12, sampling=(1.0, 1.0, 3, 1234))
    b = ev.chat(tasks, 12, sampling=(1.0, 1.0, 3, 1234))
    c = ev.chat(tasks, 12, sampling=(1.0, 1.0, 3, 99))
    assert len(a) == 6 and a == b  # same seed: the same replies, so stages compare fairly
    assert len(set(a[:3])) > 1 and a != c  # k distinct samples per task; the seed matters
    g = ev.chat(tasks, 12)
    assert g == ev.chat(tasks, 12, sampling=(0.0, 1.0, 1, 5))  # T=0 is greedy whatever the seed
