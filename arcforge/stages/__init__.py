"""Stage runners, one module per stage family; importing this package registers them all.

Each module registers its runner with `arcforge.pipeline.register_stage(kind, ...)` and, for a
new kind, its config class in `arcforge.config.STAGE_CONFIGS`.
"""

from arcforge.stages import agentic_rl, distill, general_rl, lm, rl, sft, synth  # noqa: F401
from arcforge.stages.common import (  # noqa: F401
    build_world_from_cfg,
    model_for_stage,
    prepare_tokenizer,
    prepare_world,
    world_records,
)
