"""The embedded default world: a seeded, procedurally generated source of corpora, task pools
and SFT demonstrations. Same seed, byte-identical output; standard library only.

    from arcforge.world import WorldConfig, build_world
    world = build_world(WorldConfig(seed=0))
    world.corpus(); world.tasks("reasoning", "test"); world.sft_demos(); world.tools()
"""

from arcforge.world.build import build_world
from arcforge.world.chat import check_constraints
from arcforge.world.corpus import Doc
from arcforge.world.demos import Demo
from arcforge.world.kb import KB, Entity, Triple
from arcforge.world.longctx import LongItem
from arcforge.world.pages import Page
from arcforge.world.repos import Bug, Repo
from arcforge.world.suites import SUITES
from arcforge.world.tools import calculate
from arcforge.world.world import DemoCounts, TaskCounts, World, WorldConfig

__all__ = [
    "KB",
    "SUITES",
    "Bug",
    "Demo",
    "DemoCounts",
    "Doc",
    "Entity",
    "LongItem",
    "Page",
    "Repo",
    "TaskCounts",
    "Triple",
    "World",
    "WorldConfig",
    "build_world",
    "calculate",
    "check_constraints",
]
