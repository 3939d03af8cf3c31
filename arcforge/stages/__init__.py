"""Stages, one module per stage family, each with its config model and its runner.

`arcforge.run_config` puts the config models together (the run config's discriminated union on
`kind`) and `arcforge.pipeline` runs them. `context` is the run context every runner gets,
`world_source` the `world:` data source, `common` the model and engine plumbing they share.
"""

from arcforge.stages.common import model_for_stage  # noqa: F401
from arcforge.stages.context import (  # noqa: F401
    RunContext,
    build_world_from_cfg,
    prepare_tokenizer,
    prepare_world,
)
from arcforge.stages.world_source import world_records, world_resolver  # noqa: F401
