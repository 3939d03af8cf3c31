"""Shared fixture: one small world (scale 0.1) built once per test session."""

import pytest

from arcforge.world import World, WorldConfig, build_world


@pytest.fixture(scope="session")
def world() -> World:
    return build_world(WorldConfig(seed=7, scale=0.1))
