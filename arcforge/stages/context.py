"""The run context every stage runner gets, and what builds it.

`RunContext` holds the run config and the run dir, and builds the world and the tokenizer on
first use: `prepare_world` / `prepare_tokenizer` run once per run (cached in RUN_DIR/world and
RUN_DIR/tokenizer); a saved world must match the config (`check_saved_world`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arcforge.config import BaseRunCfg, StageCfg
from arcforge.data.curate import curate
from arcforge.device import set_run_device
from arcforge.errors import ConfigError, UserError
from arcforge.model.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer


@dataclass
class RunContext:
    """What every stage runner gets: the config, the run dir, the lazily built world/tokenizer."""

    cfg: BaseRunCfg  # an arcforge.run_config.RunCfg: its stages are typed by kind
    run_dir: Path
    _world: object | None = field(default=None, repr=False)
    _tokenizer: object | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        set_run_device(self.cfg.device)  # every model this run opens goes there

    @property
    def world(self):  # -> arcforge.world.World
        if self._world is None:
            self._world = prepare_world(self)
        return self._world

    @property
    def tokenizer(self):  # -> PreTrainedTokenizerFast
        if self._tokenizer is None:
            self._tokenizer = prepare_tokenizer(self)
        return self._tokenizer

    def stage_dir(self, name: str) -> Path:
        return self.run_dir / name

    def checkpoint(self, name: str) -> Path:
        return self.run_dir / name / "checkpoint"

    def init_checkpoint(self, stage: StageCfg) -> Path | None:
        """The checkpoint a stage starts from: `init`, else the previous stage that trains
        (synthesis stages write no checkpoint), else none (`model.path` or a preset)."""
        names = [s.name for s in self.cfg.stages]
        i = names.index(stage.name)
        earlier = [s.name for s in self.cfg.stages[:i] if s.kind != "synth"]
        src = stage.init or (earlier[-1] if earlier else None)
        if src is None:
            return None
        ck = self.checkpoint(src)
        if not (ck / "config.json").exists():
            raise UserError(
                f"stage {stage.name!r} starts from {src!r}, which has no checkpoint yet"
            )
        return ck


# ---- world ---------------------------------------------------------------------------------


def world_config_from_cfg(cfg: BaseRunCfg):  # -> arcforge.world.WorldConfig
    """The WorldConfig a run config asks for (`world.seed`, `world.scale`, `world.options`)."""
    from arcforge.world import WorldConfig

    known = set(WorldConfig.__dataclass_fields__)
    bad = sorted(set(cfg.world.options) - known)
    if bad:
        raise ConfigError(f"world.options: unknown key(s) {bad}; known: {sorted(known)}")
    try:
        return WorldConfig.from_dict(
            {**cfg.world.options, "seed": cfg.world.seed, "scale": cfg.world.scale}
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"world.options: {err}") from None


def build_world_from_cfg(cfg: BaseRunCfg):
    from arcforge.world import build_world

    return build_world(world_config_from_cfg(cfg))


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def check_saved_world(saved, wanted, wdir: Path) -> None:
    """A run's saved world must be the one its config asks for: a config edited after the
    world was generated (more expert episodes, other task counts) would otherwise be ignored
    without a word, since the world is read back from disk."""
    have, want = _flat(saved.to_dict()), _flat(wanted.to_dict())
    diff = [
        f"{k}: {have.get(k)!r} -> {want.get(k)!r}"
        for k in sorted(set(have) | set(want))
        if have.get(k) != want.get(k)
    ]
    if diff:
        raise UserError(
            f"the world in {wdir} was generated with other settings than this config asks for "
            f"({'; '.join(diff[:6])}{' ...' if len(diff) > 6 else ''}); use a new --run-dir, "
            f"or delete {wdir} and the stages after it to regenerate"
        )


def prepare_world(ctx: RunContext):
    from arcforge.world import World

    wdir = ctx.run_dir / "world"
    if (wdir / "DONE").exists():
        world = World.load(wdir)
        check_saved_world(world.config, world_config_from_cfg(ctx.cfg), wdir)
    else:
        print("[world] generating the embedded world ...")
        world = build_world_from_cfg(ctx.cfg)
        world.save(wdir)
        (wdir / "DONE").write_text("ok")
    return world


# ---- tokenizer -----------------------------------------------------------------------------


def resolve_model_path(path: str) -> str:
    """A checkpoint directory, or a registered real checkpoint's name (imported and cached on
    first use, arcforge.model.importer)."""
    if Path(path).exists():
        return path
    from arcforge.model.importer import REGISTRY, real_checkpoint

    if path in REGISTRY:
        return str(real_checkpoint(path))
    raise UserError(
        f"tokenizer/model path not found: {path} (nor a registered checkpoint: {sorted(REGISTRY)})"
    )


def prepare_tokenizer(ctx: RunContext):
    cfg = ctx.cfg
    src = cfg.model.path or cfg.tokenizer.path
    if src:
        src = resolve_model_path(src)
        c = cfg.chat
        try:
            tok, _ = load_tokenizer(src, c.format, c.template_kwargs, c.dialect)
        except ValueError as e:
            raise UserError(f"{src}: {e}") from None
        return tok
    if cfg.chat.format == "native":
        raise UserError(
            "chat.format native needs a checkpoint with its own chat template (model.path or "
            "tokenizer.path); a tokenizer trained here uses arcforge's format"
        )
    tdir = ctx.run_dir / "tokenizer"
    if (tdir / "DONE").exists():
        return load_tokenizer(tdir)[0]
    docs, _ = curate(ctx.world.corpus())
    texts, n = [], 0
    for d in docs:
        if n >= cfg.tokenizer.train_chars:
            break
        texts.append(d.text)
        n += len(d.text)
    print(
        f"[tokenizer] training byte-level BPE ({cfg.tokenizer.vocab_size}, space_split="
        f"{cfg.tokenizer.space_split}) on {n / 1e6:.1f}M chars"
    )
    tok = train_tokenizer(texts, cfg.tokenizer.vocab_size, space_split=cfg.tokenizer.space_split)
    save_tokenizer(tok, tdir)
    (tdir / "DONE").write_text("ok")
    return tok
