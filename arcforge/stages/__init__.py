"""Stages, one module per stage family, each with its config model and its runner.

`arcforge.run_config` puts the config models together (the run config's discriminated union on
`kind`) and `arcforge.pipeline` runs them; `common` holds what every stage shares.
"""

from arcforge.stages.common import (  # noqa: F401
    RunContext,
    build_world_from_cfg,
    model_for_stage,
    prepare_tokenizer,
    prepare_world,
    world_records,
)
