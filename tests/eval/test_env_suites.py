"""The environment eval suites (tool, search, tir, code, terminal, swe) run held-out world tasks
through the real environments: the scripted expert scores 1 on each, a garbage policy 0."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from arcforge.config import EvalCfg
from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.rollout.engines.base import Completion, SamplingParams
from arcforge.rollout.policies import GarbageEngine, ScriptedEngine, expert_engine
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message

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
    import random

    from arcforge.eval.suites import solution_clusters
    from arcforge.world.code.codelib import code_space
    from arcforge.world.tasks.pools import code_task

    tasks = world.tasks("code", "test")  # one distinct function per held-out item
    assert solution_clusters(tasks) is None
    a, b = code_space(world.config.seed).test[:2]  # a function asked twice, another once
    rng = random.Random(0)
    asked = [
        code_task(rng, a, a.names[0]),
        code_task(rng, a, a.names[0]),
        code_task(rng, b, b.names[0]),
    ]
    assert asked[0].instruction != asked[1].instruction  # another example, other hidden tests
    labels = solution_clusters(asked)
    assert labels is not None and labels[0] == labels[1] != labels[2]
    assert solution_clusters(world.tasks("terminal", "test")) is None  # one solution per item


def test_swe_bugs_sharing_a_fix_form_one_cluster(world):
    import random

    from arcforge.eval.suites import solution_clusters
    from arcforge.world.tasks.pools import swe_tasks
    from arcforge.world.text.demos import fixed_body

    assert solution_clusters(world.tasks("swe", "test")) is None  # one function per item
    # many bugs drawn from one repo: some share a fixed body
    tasks, _ = swe_tasks(
        random.Random(0), [r for r in world.repos if r.split == "train"][:1], 0, 12, 0
    )
    labels = solution_clusters(tasks)
    fixes = [fixed_body(t) for t in tasks]
    assert labels is not None and len(set(fixes)) < len(tasks)  # one fix, several bugs
    for i in range(len(tasks)):
        for j in range(len(tasks)):
            assert (labels[i] == labels[j]) == (fixes[i] == fixes[j])


class _HalfExpert:
    """An Engine: the expert on the even samples of a task, a wrong final answer on the odd
    ones (the k copies of a task share their first prompt, so within one call the j-th copy
    of a prompt is sample j; later turns follow the expert's script)."""

    def __init__(self, tok, tasks) -> None:
        self.expert = expert_engine(tok, tasks)
        self.wrong = ScriptedEngine(tok, {}, Message("assistant", "Answer: nobody", reasoning=""))
        self.version = 0

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        seen: Counter = Counter()
        out = []
        for p in prompts:
            first_turn, j = p.count(self.expert._assistant) == 1, seen[tuple(p)]
            seen[tuple(p)] += 1
            engine = self.wrong if first_turn and j % 2 else self.expert
            out += engine.generate([p], params)
        return out


def test_sampled_env_suite_averages_k_episodes_per_task(world, tok, model):
    n, k = 3, 2
    tasks = _test_tasks(world, "tool")
    cfg = EvalCfg(suites=["tool_avg"], n=n, samples=k, max_turns=8, max_new_tokens=384)
    out = SUITES["tool_avg"](Evaluator(model, tok, expert_engine(tok, tasks), world), cfg)
    assert out.scores == [1.0] * n and out.outcomes == {"solved": n * k}
    assert len(out.episodes) == n  # one record per task: its first sample
    assert sum(c[1] for c in out.by_hops.values()) == n * k
    half = _HalfExpert(tok, tasks)
    out = SUITES["tool_avg"](Evaluator(model, tok, half, world), cfg)
    assert out.scores == [0.5] * n, out.examples  # the mean over each task's k episodes
    assert out.outcomes == {"solved": n, "wrong_answer": n}
    assert all(e["outcome"] == "solved" for e in out.episodes)


def test_sampled_env_suite_is_seeded_and_not_greedy(world, tok, model):
    from arcforge.rollout.engines.local import LocalEngine

    ev = Evaluator(model, tok, LocalEngine(model, pad_token_id=tok.pad_token_id or 0), world)
    cfg = EvalCfg(
        suites=["tool_avg"], n=2, samples=2, max_turns=2, max_new_tokens=12, temperature=1.0
    )
    a, b = SUITES["tool_avg"](ev, cfg), SUITES["tool_avg"](ev, cfg)
    assert a.examples == b.examples and a.episodes == b.episodes  # same seed, same episodes
    c = SUITES["tool_avg"](ev, cfg.model_copy(update={"seed": 7}))
    greedy = SUITES["tool"](ev, cfg)
    assert c.examples != a.examples and greedy.examples != a.examples
