"""`make_engine`: the rollout engine a config (`engine:` of a stage) names: `local` (the
in-process LocalEngine, local.py), `vllm` (a vLLM OpenAI-compatible server, vllm.py) or `sglang`
(SGLang's native `/generate`, sglang.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from arcforge.errors import ConfigError
from arcforge.rollout.engines.base import Engine
from arcforge.rollout.engines.local import LocalEngine
from arcforge.rollout.engines.sglang import SGLangEngine
from arcforge.rollout.engines.vllm import VLLMEngine

if TYPE_CHECKING:
    from arcforge.config import EngineCfg


def make_engine(
    cfg: EngineCfg | None,
    model: nn.Module,
    *,
    pad_token_id: int,
    precision: str = "fp32",
    max_batch: int = 64,
    routing_replay: bool = False,
) -> Engine:
    """The rollout engine a config names, holding `model`'s current weights.

    Args:
        cfg: `engine:` of a stage; None is the LocalEngine.
        model: the policy (copied: to the LocalEngine's private weights, or to disk for vLLM).
        pad_token_id, precision, max_batch: LocalEngine settings (servers take fp32 only).
        routing_replay: the LocalEngine records each completion's MoE routing (servers cannot).
    """
    if cfg is None or cfg.kind == "local":
        return LocalEngine(
            model,
            pad_token_id=pad_token_id,
            precision=precision,
            max_batch=max_batch,
            record_routing=routing_replay,
        )
    if routing_replay:
        raise ConfigError(
            f"routing_replay records the experts of the LocalEngine's own forwards; engine.kind "
            f"{cfg.kind} does not return them: use engine.kind local or turn routing_replay off"
        )
    if precision != "fp32":
        raise ConfigError(
            f"engine.kind {cfg.kind} serves the checkpoint's fp32 weights (a server's own dtype "
            f"flag goes in engine.extra_args); engine precision {precision!r} is for the local "
            "engine"
        )
    server = {  # what both server engines take from `engine:`
        "url": cfg.url,
        "workdir": cfg.workdir,
        "python": cfg.python,
        "max_model_len": cfg.max_model_len,
        "startup_timeout": cfg.startup_timeout,
        "extra_args": cfg.extra_args,
    }
    if cfg.kind == "sglang":
        return SGLangEngine(model, **server)
    return VLLMEngine(model, kv_cache_gib=cfg.kv_cache_gib, **server)
