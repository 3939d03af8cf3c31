"""LoRA adapters on any training stage (a stage's `lora:`), through PyPI's peft.

With `lora:` set, `apply_lora` wraps the stage's starting model in a peft `PeftModelForCausalLM`
whose base weights are frozen, so the optimizer (which takes the trainable parameters) sees only
the adapters. What leaves the trainer is always a plain model under the base model's parameter
names, so nothing downstream knows LoRA was on:

- `policy_state_dict` is what RL trainers push into rollout engines (`engine.load_weights`): the
  merged weights W + scale * B @ A, computed out of place, under the base names that the
  LocalEngine and the vLLM/SGLang checkpoints expect. The live adapters are not touched, so no
  merge/unmerge round trip perturbs the trained weights.
- `plain_model` is a merged copy (peft's `merge_and_unload` on a deep copy), the model a
  rollout engine or a probe is built from.
- `save_stage_model` writes the stage checkpoint as the merged model (a plain `save_pretrained`
  directory, as without LoRA, so later stages, eval and vLLM load it unchanged) and, with
  `save_adapter`, peft's adapter in `adapter/` beside it.

The resumable training state needs nothing here: the PeftModel's state dict holds the base
weights and the adapters, the optimizer's state holds the adapters' moments, and a resumed stage
wraps its starting model the same way before loading them.

Unknown `target_modules` are a config error naming the model's linear layers (peft's own message
only says none matched).
"""

from __future__ import annotations

import copy
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from arcforge.config import LoraCfg
from arcforge.errors import ConfigError
from arcforge.model.checkpoint import save_checkpoint

ADAPTER_DIR = "adapter"  # peft's adapter files inside a stage checkpoint


def is_lora(model: nn.Module) -> bool:
    """Whether `model` is a peft model (LoRA adapters on a frozen base). A run without LoRA
    never imports peft: no model can be a peft model before peft is imported."""
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def linear_names(model: nn.Module) -> list[str]:
    """The last name part of every linear layer of `model` except the output head (what a
    `target_modules` entry matches), sorted."""
    get_out = getattr(model, "get_output_embeddings", None)
    head = get_out() if callable(get_out) else None
    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and m is not head and name
        }
    )


def check_targets(model: nn.Module, cfg: LoraCfg, where: str) -> None:
    """Raise ConfigError unless every name in `cfg.target_modules` is a module of `model`."""
    if cfg.target_modules == "all-linear":
        return
    have = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules() if name}
    missing = [t for t in cfg.target_modules if t not in have]
    if missing:
        raise ConfigError(
            f"{where}: lora.target_modules {missing} name no module of this "
            f"{type(model).__name__}; its linear layers: {linear_names(model)} "
            f'(or target_modules: "all-linear")'
        )


def apply_lora(
    model: nn.Module, cfg: LoraCfg | None, where: str = "lora", seed: int = 0
) -> nn.Module:
    """`model` with LoRA adapters (`cfg`), or `model` itself when `cfg` is None.

    The adapters start as an identity (B = 0), so the wrapped model computes what `model` did;
    their A matrices are drawn from `seed` (the global RNG state is left untouched), so a
    stage starts from the same adapters on every run.
    Args:
        where: names the stage in errors.
    """
    if cfg is None:
        return model
    if is_lora(model):
        raise ConfigError(f"{where}: the model already carries LoRA adapters")
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError(
            f"{where}: lora needs PyPI's peft: pip install 'arcforge[lora]'"
        ) from None
    check_targets(model, cfg, where)
    targets = cfg.target_modules if cfg.target_modules == "all-linear" else list(cfg.target_modules)
    lcfg = LoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=targets,
        bias="none",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        wrapped = get_peft_model(model, lcfg)
    for p in wrapped.parameters():
        if not p.requires_grad:
            p.grad = None  # a frozen weight's leftover gradient would count in the clipped norm
    return wrapped


def policy_state_dict(model: nn.Module, clone: bool = False) -> dict[str, torch.Tensor]:
    """The weights a rollout engine loads: `model.state_dict()`, or for a LoRA model the merged
    weights under the base model's names (adapter-free layers are the live tensors, as in a
    plain state dict). `clone` detaches and copies every tensor (a push that outlives the step)."""
    if not is_lora(model):
        sd = model.state_dict()
        return {k: v.detach().clone() for k, v in sd.items()} if clone else sd
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()  # the HF model with the LoRA layers inside
    merged: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, mod in base.named_modules():
            if not isinstance(mod, LoraLayer) or mod.merged:
                continue
            layer = mod.get_base_layer()
            w = layer.weight.detach()
            for adapter in mod.active_adapters:
                if adapter in mod.lora_A or adapter in getattr(mod, "lora_embedding_A", {}):
                    w = w + mod.get_delta_weight(adapter).to(w.dtype)
            merged[f"{name}.weight"] = w
    out = {}
    for key, v in base.state_dict().items():
        parts = key.split(".")
        if any(p.startswith("lora_") for p in parts):
            continue  # lora_A, lora_B, lora_embedding_*, lora_magnitude_vector
        key = ".".join(p for p in parts if p != "base_layer")
        v = merged.get(key, v)
        out[key] = v.detach().clone() if clone else v
    return out


def plain_model(model: nn.Module) -> nn.Module:
    """`model`, or for a LoRA model a merged copy (a plain transformers model; `model` is left
    as it is)."""
    if not is_lora(model):
        return model
    return copy.deepcopy(model).merge_and_unload()


def save_stage_model(
    model: nn.Module,
    tokenizer: Any,
    out_dir: Path,
    extra: dict[str, Any] | None = None,
    lora: LoraCfg | None = None,
    save: Callable[..., Path] = save_checkpoint,
) -> Path:
    """Write a stage's checkpoint with `save` (`save_checkpoint`, or `export_hf` for a stage
    that may be sharded): the merged model for a LoRA model, plus peft's adapter in
    `adapter/` when `lora.save_adapter`."""
    if not is_lora(model):
        return save(model, tokenizer, out_dir, extra=extra)
    path = save(plain_model(model), tokenizer, out_dir, extra={**(extra or {}), "lora": True})
    if lora is None or lora.save_adapter:
        tmp = path / f".{ADAPTER_DIR}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp))
        tmp.rename(path / ADAPTER_DIR)
    return path
