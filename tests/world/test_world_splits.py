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
