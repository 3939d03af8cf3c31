"""What several `arcforge` commands share: the config argument, the run-dir option, and the one
place a command sets up the world it works on (and reads `world:` data sources from it).

Heavy imports stay inside the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

ConfigArg = typer.Argument(
    None, help="YAML run config (default: configs/demo.yaml), then a.b=value overrides."
)
RunDirOpt = typer.Option(None, "--run-dir", help="Where the run's files go (default: runs/<name>).")


def split_config_args(args: list[str] | None) -> tuple[str | None, list[str]]:
    """First argument is the config unless it looks like an override."""
    args = list(args or [])
    if args and "=" not in args[0]:
        return args[0], args[1:]
    return None, args


def load_run_config(args: list[str] | None):
    """The run config of a command line's `CONFIG [a.b=value ...]` arguments."""
    from arcforge.run_config import load_config

    path, overrides = split_config_args(args)
    return load_config(path, overrides)


def setup_world(config: Any = None):
    """The world of a run config, for a command that works on it.

    Args:
        config: a loaded run config, or the path of one (None: configs/demo.yaml).
    Returns:
        The built World.
    """
    from arcforge.run_config import load_config
    from arcforge.stages.context import build_world_from_cfg

    cfg = load_config(config) if config is None or isinstance(config, str | Path) else config
    return build_world_from_cfg(cfg)


def source_loader(config: Any = None):
    """`load_records` with `world:` sources read from the world of a run config, for commands
    that read stage sources (reward-model pairs, rejection-sampling prompts).

    Args:
        config: a loaded run config, or the path of one (None: configs/demo.yaml).
    Returns:
        spec -> list[Record].
    """
    from functools import partial

    from arcforge.data.sources import load_records
    from arcforge.stages.world_source import world_resolver

    return partial(load_records, world=world_resolver(setup_world(config)))
