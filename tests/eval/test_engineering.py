"""The CC-Bench-style suites (backend Pass@1, chained steps, repo exploration) and the general
suite: a scripted oracle scores 1 and a garbage policy 0 through the real agent loop and
environments (bwrap sandbox for the code-running ones); the chain catches regressions and the
explorer is scored on the files it opened."""

import pytest

from arcforge.config import EvalCfg
from arcforge.envs.chain_env import ChainEnv
from arcforge.envs.explore_env import ExploreEnv
from arcforge.eval.engineering import backend_tasks, expert_engine_for
from arcforge.eval.evaluator import Evaluator
from arcforge.eval.suites import SUITES
from arcforge.model.checkpoint import init_model
from arcforge.model.presets import build_config
from arcforge.model.tokenizer import train_tokenizer
from arcforge.rollout.policies import GarbageEngine, ScriptedEngine
from arcforge.sandbox.bwrap import bwrap_available
from arcforge.types import Message
from arcforge.world.tasks.chains import chain_tasks
from arcforge.world.tasks.explore import explore_tasks

pytestmark = pytest.mark.usefixtures("one_thread")


needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot run here")
CFG = EvalCfg(
    n=3, n_per_suite={"backend": 2, "chained": 2, "explore": 3}, max_turns=6, max_new_tokens=512
)


@pytest.fixture(scope="module")
def tok(world):
    return train_tokenizer([d.text for d in world.corpus()[:600]], vocab_size=1024)


@pytest.fixture(scope="module")
def model(tok):
    conf = build_config(
        "nano", vocab_size=len(tok), max_position_embeddings=8192, pad_token_id=tok.pad_token_id
    )
    return init_model(conf, seed=0)


def evaluator(world, tok, model, engine) -> Evaluator:
    return Evaluator(model=model, tokenizer=tok, engine=engine, world=world)


def suite_tasks(world, suite):
    if suite == "backend":
        return backend_tasks(world, CFG.n_per_suite["backend"])
    if suite == "chained":
        return chain_tasks(world.config.seed, CFG.n_per_suite["chained"])
    return explore_tasks(world.repos, world.config.seed, CFG.n_per_suite["explore"])


@pytest.mark.parametrize(
    "suite",
    [
        pytest.param("backend", marks=needs_bwrap),
        pytest.param("chained", marks=needs_bwrap),
        "explore",
    ],
)
def test_oracle_scores_one_and_garbage_zero(world, tok, model, suite):
    tasks = suite_tasks(world, suite)
    if suite == "backend":
        assert {t.kind for t in tasks} == {"code", "swe"}
    expert = SUITES[suite](evaluator(world, tok, model, expert_engine_for(tok, tasks)), CFG)
    assert expert.scores == [1.0] * len(tasks), expert.examples
    one = CFG.model_copy(update={"n_per_suite": {suite: 1}})  # junk is slow to grade: one task
    junk = SUITES[suite](evaluator(world, tok, model, GarbageEngine(tok, seed=3)), one)
    assert junk.scores == [0.0], junk.examples


def test_general_suites_oracle_and_garbage(world, tok, model):
    tasks = world.tasks("chat", "test")[: CFG.n]
    scripts = {
        t.instruction: [Message("assistant", t.metadata["solution"], reasoning="ok")] for t in tasks
    }
    oracle = evaluator(world, tok, model, ScriptedEngine(tok, scripts))
    junk = evaluator(world, tok, model, GarbageEngine(tok, seed=0))
    assert SUITES["general"](oracle, CFG).scores == [1.0] * len(tasks)
    assert SUITES["general"](junk, CFG).scores == [0.0] * len(tasks)
    # loose: partial credit for well-formed replies; junk may meet a constraint by accident
    assert SUITES["general_loose"](oracle, CFG).scores == [1.0] * len(tasks)
    loose_junk = SUITES["general_loose"](junk, CFG).scores
    assert sum(loose_junk) / len(loose_junk) < 0.5
    # a reply whose think block never closes is malformed: 0 even if its words would comply
    t = tasks[0]
    broken = {t.instruction: [Message("assistant", "<think>\n" + t.metadata["solution"])]}
    one = CFG.model_copy(update={"n_per_suite": {"general_loose": 1}})
    ev = evaluator(world, tok, model, ScriptedEngine(tok, broken))
    assert SUITES["general_loose"](ev, one).scores == [0.0]


@needs_bwrap
def test_chain_catches_a_regression(world):
    task = chain_tasks(world.config.seed, 4)[0]
    steps = task.metadata["steps"]
    env = ChainEnv()
    try:
        env.reset(task)
        first = env.step(Message("assistant", f"```python\n{steps[0]['solution']}```"))
        assert not first.done and "Step 1 check: passed" in first.observations[0].content
        # step 2 is right but also redefines step 1's function wrongly
        name = steps[0]["entry_point"]
        broken = f"{steps[1]['solution']}\n\ndef {name}(*args):\n    return None\n"
        second = env.step(Message("assistant", f"```python\n{broken}```"))
        r = env.verify()
    finally:
        env.close()
    assert r.score == 0.0
    assert r.details["per_step"][1] == {
        "step": 2,
        "own": True,
        "earlier": False,
        "broken": [1],
        "submitted": True,
    }
    assert r.details["regressions"] == 1
    if len(steps) > 2:
        assert "earlier steps now failing: [1]" in second.observations[0].content


def test_explorer_is_scored_on_the_files_it_opened(world):
    task = explore_tasks(world.repos, world.config.seed, 1)[0]
    target = task.metadata["target"]
    assert target.split("/")[-1] not in task.instruction  # the file is never named

    def run(paths):
        env = ExploreEnv(world.repos)
        env.reset(task)
        listing = env.list_files("")
        for p in paths:
            env.read_file(p)
        env.step(Message("assistant", f"Answer: {target}"))
        return listing, env.verify()

    listing, ok = run([target])
    assert ok.score == 1.0 and target in listing.splitlines()
    others = [p for p in listing.splitlines() if p != target]
    assert run([others[0]])[1].score == 0.0  # the wrong file
    greedy = run(listing.splitlines())[1]  # open everything
    assert greedy.score == 0.0 and greedy.details["found"] and not greedy.details["within_limit"]
