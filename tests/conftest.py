"""Shared fixtures: one small world (seed 7, scale 0.1) and a tokenizer trained on its corpus,
built once per test session (test modules that need other sizes define their own), and
`one_thread` for modules of tiny tensors."""

import os

import pytest
import torch

from arcforge.model.tokenizer import train_tokenizer
from arcforge.world import World, WorldConfig, build_world


@pytest.fixture(scope="session")
def world() -> World:
    return build_world(WorldConfig(seed=7, scale=0.1, n_repos=40, n_test_repos=20))


@pytest.fixture(scope="session")
def tok(world):
    return train_tokenizer([d.text for d in world.corpus()[:300]], vocab_size=400)


@pytest.fixture(scope="session", autouse=True)
def _layer_cache(tmp_path_factory):
    """Container-root layers built by tests go to a per-session cache, not ~/.cache."""
    os.environ["ARCFORGE_LAYER_CACHE"] = str(tmp_path_factory.mktemp("layers"))


@pytest.fixture
def one_thread():
    """Tiny tensors: one intra-op thread, no contention on a busy 2-core machine (modules use
    it with `pytestmark = pytest.mark.usefixtures("one_thread")`)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
