"""The run config: world, tokenizer, model, eval and an ordered list of stages typed by `kind`.

`RunCfg.stages` is a pydantic discriminated union on `kind` over the stage models, each defined
next to its runner in `arcforge/stages/<kind>.py`; this module sits above the stages and imports
them, while `arcforge.config` (the shared pieces) imports none. Unknown keys are errors naming
the key and the file; so are wrong types. Overrides address stages by name
(`stages.sft.lr=1e-4`) or index (`stages.2.lr=...`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, get_args

import yaml
from pydantic import Field, ValidationError

from arcforge.config import BaseRunCfg, StageCfg, check_stages, explain, read_yaml
from arcforge.errors import ConfigError
from arcforge.stages.agentic_rl import AgenticRLStageCfg
from arcforge.stages.distill import DistillStageCfg
from arcforge.stages.general_rl import GeneralRLStageCfg
from arcforge.stages.lm import LMStageCfg
from arcforge.stages.rl import RLStageCfg
from arcforge.stages.sft import SFTStageCfg
from arcforge.stages.synth import SynthStageCfg

AnyStageCfg = Annotated[
    LMStageCfg
    | SFTStageCfg
    | SynthStageCfg
    | RLStageCfg
    | AgenticRLStageCfg
    | GeneralRLStageCfg
    | DistillStageCfg,
    Field(discriminator="kind"),
]

# kind -> its stage model (pretrain and midtrain share one)
STAGE_KINDS: dict[str, type[StageCfg]] = {
    kind: cls
    for cls in get_args(get_args(AnyStageCfg)[0])
    for kind in get_args(cls.model_fields["kind"].annotation)
}


class RunCfg(BaseRunCfg):
    """A run: `BaseRunCfg`'s settings and its stages, each validated by its `kind`'s model."""

    stages: list[AnyStageCfg] = []


def _parse_stages(raw: Any, where: str) -> list[StageCfg]:
    """Each stage by its kind's model, so errors name `stages[i].key` and the known kinds."""
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: key 'stages' must be a list")
    out: list[StageCfg] = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or "kind" not in s:
            raise ConfigError(f"{where}: key 'stages[{i}]' needs a 'kind'")
        cls = STAGE_KINDS.get(s["kind"])
        if cls is None:
            raise ConfigError(
                f"{where}: key 'stages[{i}].kind': unknown stage kind {s['kind']!r}; "
                f"known: {sorted(STAGE_KINDS)}"
            )
        try:
            out.append(cls.model_validate(s))
        except ValidationError as err:
            raise explain(err, where, f"stages[{i}]") from None
    return out


def parse_config(raw: dict[str, Any], where: str = "<config>") -> RunCfg:
    """Validate a raw run config dict; errors name the key and `where` (the file)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: the top level must be a mapping")
    raw = dict(raw)
    stages = raw.pop("stages", [])
    try:
        cfg = RunCfg.model_validate(raw)
    except ValidationError as err:
        raise explain(err, where) from None
    cfg.stages = _parse_stages(stages, where)
    if cfg.seed:  # a run seed shifts every stage's own seed (their differences stay)
        for s in cfg.stages:
            if isinstance(getattr(s, "seed", None), int):
                s.seed += cfg.seed
    check_stages(cfg.stages, cfg.eval.suites, where)
    return cfg


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunCfg:
    """Read a YAML run config (default: configs/demo.yaml), apply overrides, validate."""
    raw, where = read_yaml(path, overrides)
    return parse_config(raw, where)


def dump_config(cfg: RunCfg) -> str:
    """The resolved config as YAML (every default written out), as a run saves it.

    The stage seeds are written as the run used them, with the run seed already added, so the
    dump says `seed: 0` (loading it again must not add the run seed twice)."""
    data = cfg.model_dump(mode="json")
    head = ""
    if data.get("seed"):
        head = f"# run seed {data['seed']}: already added to every stage's seed below\n"
        data["seed"] = 0
    return head + yaml.safe_dump(data, sort_keys=False)
