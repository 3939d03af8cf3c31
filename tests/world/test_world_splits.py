"""Train / held-out splits: disjoint per suite, held-out material kept out of training text."""

import pytest

from arcforge.world import SUITES


@pytest.mark.parametrize("suite", SUITES)
def test_splits_disjoint(world, suite):
    train, test = world.tasks(suite, "train"), world.tasks(suite, "test")
    assert train and test
    assert {t.id for t in train}.isdisjoint({t.id for t in test})
    assert {t.instruction for t in train}.isdisjoint({t.instruction for t in test})
    if suite == "terminal":  # one instruction may recur in train with other files (the
        # expected output differs); ids and init scripts stay distinct
        assert len({t.context["init_script"] for t in train}) == len(train)
    else:
        assert len({t.instruction for t in train}) == len(train)
    assert all(t.split == "train" for t in train) and all(t.split == "test" for t in test)


def test_unknown_suite_is_a_clear_error(world):
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        world.tasks("nope", "train")


def test_heldout_math_and_repos_not_in_corpus(world):
    corpus_text = "\n".join(d.text for d in world.corpus())
    for t in world.tasks("reasoning", "test"):
        assert t.instruction not in corpus_text
    for t in world.tasks("swe", "test"):
        assert t.context["repo"] not in corpus_text  # test repos never reach pretraining


def test_heldout_corpus_disjoint_and_clean(world):
    held = world.heldout_corpus()
    assert held and all(d.domain in ("web", "code", "math") and d.dup_of is None for d in held)
    assert {d.text for d in held}.isdisjoint({d.text for d in world.corpus()})
    assert {d.id for d in held}.isdisjoint({d.id for d in world.corpus()})


def test_demos_use_train_tasks_only(world):
    test_ids = {t.id for s in SUITES for t in world.tasks(s, "test")}
    demos = world.sft_demos()
    assert demos and all(d.task_id and d.task_id not in test_ids for d in demos)
    with pytest.raises(ValueError):
        world.sft_demos("test")


@pytest.mark.parametrize("suite", ["tool", "search", "terminal", "code", "swe", "tir"])
def test_dev_and_fresh_tasks_are_new_items_of_the_suite(world, suite):
    """RL draws `fresh` tasks and a stage probes `dev` ones: neither may repeat an instruction of
    the train split (SFT showed those), the test split (the report's) or the other."""
    splits = {s: world.tasks(suite, s) for s in ("train", "test", "dev", "fresh")}
    assert splits["dev"] and splits["fresh"]
    instr = {s: {t.instruction for t in ts} for s, ts in splits.items()}
    for a, b in [
        ("dev", "train"),
        ("dev", "test"),
        ("fresh", "train"),
        ("fresh", "test"),
        ("dev", "fresh"),
    ]:
        assert instr[a].isdisjoint(instr[b]), (a, b)
    kind = splits["train"][0].kind
    for s in ("dev", "fresh"):
        assert all(
            t.kind == kind and t.split == s and t.id.endswith(f"-{s}-{i:05d}")
            for i, t in enumerate(splits[s])
        )
        assert [t.id for t in world.tasks(suite, s)] == [t.id for t in splits[s]]  # same again
    if suite == "terminal":  # the dev set takes every family in turn
        assert len({t.metadata["family"] for t in splits["dev"]}) >= 5
    if suite == "swe":  # other bugs in the train repos: no held-out repo, no train bug again
        test_repos = {t.context["repo"] for t in splits["test"]}
        bugs = {(t.context["repo"], t.context["bug"]["mutated"]) for t in splits["train"]}
        for s in ("dev", "fresh"):
            assert not {t.context["repo"] for t in splits[s]} & test_repos
            assert not {(t.context["repo"], t.context["bug"]["mutated"]) for t in splits[s]} & bugs
        # the buggy functions take turns: each once before any twice, however often the
        # generator draws it (RL would otherwise hardly ever see a rare function's fix)
        for s in ("dev", "fresh"):
            funcs = [t.context["bug"]["function"] for t in splits[s]]
            first = len(set(funcs))
            assert first > 3 and len(set(funcs[:first])) == first


def test_no_fresh_tasks_for_a_suite_without_a_generator(world):
    with pytest.raises(ValueError, match="has no fresh tasks"):
        world.tasks("long_context", "dev")
