"""The environment eval suites (tool, search, tir, code, terminal, swe) run held-out world tasks
through the real environments: the scripted expert scores 1 on each, a garbage policy 0."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from arcforge.config import EvalCfg
from arcforge.envs.sandbox_bwrap import bwrap_available
from arcforge.eval.suites import SUITES, Evaluator
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.policies import GarbageEngine, expert_engine

ENV_SUITES = ("tool", "search", "tir", "code", "terminal", "swe")
SANDBOXED = {"tir", "code", "terminal", "swe"}


@pytest.fixture(scope="module")
def model(tok):
    # the suites read only the model's context length; a real (untrained) nano model
    return init_model(build_config("nano", vocab_size=len(tok), max_position_embeddings=4096), 0)


def _test_tasks(world, suite: str):
    if suite == "tir":  # the tir suite replays the held-out reasoning problems with a python tool
        return [replace(t, kind="tir") for t in world.tasks("reasoning", "test")]
    return world.tasks(suite, "test")


@pytest.mark.parametrize("suite", ENV_SUITES)
def test_env_suite_scores_one_for_the_expert_and_zero_for_garbage(world, tok, model, suite):
    if suite in SANDBOXED and not bwrap_available():
        pytest.skip("bubblewrap cannot run here")
    n = 2
    cfg = EvalCfg(suites=[suite], n=n, max_turns=8, max_new_tokens=384)
    expert = Evaluator(model, tok, expert_engine(tok, _test_tasks(world, suite)), world)
    out = SUITES[suite](expert, cfg)
    assert out.scores == [1.0] * n, out.examples
    assert all(e["finish"] == "answer" for e in out.examples)
    assert out.outcomes == {"solved": n} and len(out.episodes) == n
    if suite in ("tool", "search"):  # per hop count: [solved, n], hop counts of these tasks
        hops = Counter(str(t.metadata["hops"]) for t in _test_tasks(world, suite)[:n])
        assert out.by_hops == {h: [c, c] for h, c in hops.items()}
    else:
        assert out.by_hops is None
    garbage = Evaluator(model, tok, GarbageEngine(tok, seed=5), world)
    k = 1 if suite in ("code", "swe") else n  # their grading runs pytest: one episode is enough
    out = SUITES[suite](garbage, cfg.model_copy(update={"max_new_tokens": 64, "n": k}))
    assert out.scores == [0.0] * k, out.examples
    assert "solved" not in out.outcomes and sum(out.outcomes.values()) == k
    assert Counter(e["outcome"] for e in out.episodes) == out.outcomes
    if out.by_hops is not None:
        assert sum(c[1] for c in out.by_hops.values()) == k
        assert all(c[0] == 0 for c in out.by_hops.values())


def test_code_items_of_one_held_out_function_form_one_cluster(world):
    from arcforge.eval.suites import solution_clusters

    tasks = world.tasks("code", "test")
    labels = solution_clusters(tasks)
    funcs = [(t.metadata["template"], t.metadata["entry_point"]) for t in tasks]
    assert labels is not None and len(set(funcs)) < len(tasks)  # some function asked twice
    for i in range(len(tasks)):
        for j in range(len(tasks)):
            assert (labels[i] == labels[j]) == (funcs[i] == funcs[j])
    assert solution_clusters(world.tasks("terminal", "test")) is None  # one solution per item


def test_swe_bugs_sharing_a_fix_form_one_cluster(world):
    from arcforge.eval.suites import solution_clusters
    from arcforge.rollout.policies import fixed_body

    tasks = world.tasks("swe", "train") + world.tasks("swe", "test")  # the small world's
    labels = solution_clusters(tasks)  # held-out bugs alone have no shared fix
    fixes = [fixed_body(t) for t in tasks]
    assert labels is not None and len(set(fixes)) < len(tasks)  # one fix, several bugs
    for i in range(len(tasks)):
        for j in range(len(tasks)):
            assert (labels[i] == labels[j]) == (fixes[i] == fixes[j])
