"""The embedded default world: a seeded, procedurally generated source of corpora, task pools
and SFT demonstrations. Same seed, byte-identical output; standard library only.

    from arcforge.world import WorldConfig, build_world
    world = build_world(WorldConfig(seed=0))
    world.corpus(); world.tasks("reasoning", "test"); world.sft_demos(); world.tools()
"""

from arcforge.world.build import build_world
from arcforge.world.code.repos import Bug, Repo
from arcforge.world.knowledge.kb import KB, Entity, Triple
from arcforge.world.knowledge.pages import Page
from arcforge.world.knowledge.tools import calculate
from arcforge.world.tasks.constrained_chat import check_constraints
from arcforge.world.tasks.longctx import LongItem
from arcforge.world.tasks.pools import SUITES
from arcforge.world.text.corpus import Doc
from arcforge.world.text.demos import Demo
from arcforge.world.world import World
from arcforge.world.world_config import DemoCounts, TaskCounts, WorldConfig

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
