"""Model construction and checkpoint I/O.

Every checkpoint is a `save_pretrained` directory: `config.json`, safetensors weights and the
tokenizer files with arcforge's Jinja `chat_template` (arcforge.chat.jinja), so transformers
(`AutoModelForCausalLM.from_pretrained(dir)`, `apply_chat_template`) and vLLM load and prompt it
as is. arcforge's own metadata (stage, step, ...) goes in a side file `arcforge.json` that
other tools ignore; `config.json` also carries the transformers-4.x spellings of the RoPE base
and dtype (`rope_theta`, `torch_dtype`) for readers pinned to 4.x. A checkpoint is written to a temporary sibling directory and renamed into
place, so a run killed mid-save never leaves a half-written checkpoint under the final name.

Context extension (mid-training) changes the RoPE base of a live model: `set_rope_theta`
updates the config and recomputes the rotary embeddings' `inv_freq` buffers in place (they are
non-persistent buffers derived from the config, so a reload from the saved config agrees).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from arcforge.device import run_device
from arcforge.model.dsa import use_stable_topk
from arcforge.model.tokenizer import save_tokenizer

META_FILE = "arcforge.json"


def init_model(config: PretrainedConfig, seed: int) -> PreTrainedModel:
    """A freshly initialised causal LM of `config`'s architecture (Llama, GLM-5, ...); the same
    (config, seed) gives the same weights. DSA models get the deterministic top-k
    (arcforge.model.dsa).

    The global RNG state is left untouched (the init runs under a forked RNG).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    return use_stable_topk(model)


def load_model(
    path: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | None = None
) -> PreTrainedModel:
    """Load any local HF causal LM directory (ours or a real checkpoint); no network.

    The model is placed on `device`, by default the run's device (`arcforge.device`); DSA
    models get the deterministic top-k (arcforge.model.dsa)."""
    p = Path(path)
    if not (p / "config.json").is_file():
        raise FileNotFoundError(f"not a model directory (no config.json): {p}")
    model = AutoModelForCausalLM.from_pretrained(str(p), dtype=dtype, local_files_only=True)
    return use_stable_topk(model).to(device or run_device())


def save_checkpoint(
    model: PreTrainedModel,
    tokenizer: Any,
    out_dir: str | Path,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write model (safetensors) + tokenizer (+ `arcforge.json` from `extra`) to `out_dir`.

    Args:
        model: a transformers causal LM.
        tokenizer: its tokenizer (saved with `save_tokenizer`), or None to skip.
        out_dir: the final directory; replaced atomically if it exists.
        extra: JSON-serialisable metadata.

    Returns:
        The checkpoint directory.
    """
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(str(tmp))
    _add_compat_keys(tmp / "config.json")
    if tokenizer is not None:
        save_tokenizer(tokenizer, tmp)
    if extra is not None:
        (tmp / META_FILE).write_text(json.dumps(extra, indent=2, sort_keys=True) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def _add_compat_keys(config_path: Path) -> None:
    """Mirror transformers-5 config keys under their 4.x names (what many vLLM builds read):
    `rope_parameters.rope_theta` -> `rope_theta`, `dtype` -> `torch_dtype`. transformers 5
    ignores the mirrors (rope_parameters wins), so both readers see the same model."""
    cfg = json.loads(config_path.read_text())
    rope = cfg.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope:
        cfg["rope_theta"] = rope["rope_theta"]
    if "dtype" in cfg and "torch_dtype" not in cfg:
        cfg["torch_dtype"] = cfg["dtype"]
    config_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def read_meta(path: str | Path) -> dict[str, Any]:
    """The `extra` dict a checkpoint was saved with ({} if none)."""
    f = Path(path) / META_FILE
    return json.loads(f.read_text()) if f.is_file() else {}


def _rotary_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]


def _set_theta(rope: dict[str, Any], theta: float) -> None:
    if "rope_theta" in rope or "rope_type" in rope:
        rope["rope_theta"] = float(theta)
        return
    for sub in rope.values():  # per-layer-type parameters, e.g. {"full_attention": {...}}
        if isinstance(sub, dict):
            sub["rope_theta"] = float(theta)


def set_rope_theta(model: PreTrainedModel, theta: float) -> None:
    """Change the RoPE base of `model` in place: config and every rotary `inv_freq` buffer."""
    configs = {id(model.config): model.config}
    for m in _rotary_modules(model):
        cfg = getattr(m, "config", None)
        if cfg is not None:
            configs[id(cfg)] = cfg
    for cfg in configs.values():
        if not isinstance(getattr(cfg, "rope_parameters", None), dict):
            raise ValueError(f"{type(cfg).__name__} has no rope_parameters dict to update")
        _set_theta(cfg.rope_parameters, theta)
    for m in _rotary_modules(model):
        rope_type = getattr(m, "rope_type", "default")
        if rope_type == "default" and hasattr(m, "compute_default_rope_parameters"):
            inv_freq, scaling = m.compute_default_rope_parameters(m.config)
        else:
            inv_freq, scaling = ROPE_INIT_FUNCTIONS[rope_type](m.config, m.inv_freq.device)
        inv_freq = inv_freq.to(device=m.inv_freq.device, dtype=m.inv_freq.dtype)  # (head_dim/2,)
        m.inv_freq = inv_freq
        if isinstance(getattr(m, "original_inv_freq", None), torch.Tensor):
            m.original_inv_freq = inv_freq.clone()
        if hasattr(m, "attention_scaling"):
            m.attention_scaling = scaling


def set_max_positions(model: PreTrainedModel, n: int) -> None:
    """Set the configured context length (config + rotary caches) of `model` in place."""
    if n <= 0:
        raise ValueError(f"max positions must be positive, got {n}")
    model.config.max_position_embeddings = n
    for m in _rotary_modules(model):
        if hasattr(m, "max_seq_len_cached"):
            m.max_seq_len_cached = n
        if hasattr(m, "original_max_seq_len"):
            m.original_max_seq_len = n


def count_params(model: torch.nn.Module) -> dict[str, int]:
    """{"total", "non_embedding"}: shared (tied) tensors are counted once."""
    total = sum(p.numel() for p in model.parameters())
    emb = 0
    if isinstance(model, PreTrainedModel):
        seen = set()
        for layer in (model.get_input_embeddings(), model.get_output_embeddings()):
            if layer is None:
                continue
            for p in layer.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    emb += p.numel()
    return {"total": total, "non_embedding": total - emb}


def resize_for_tokenizer(model: PreTrainedModel, tokenizer: Any) -> int:
    """Grow the embeddings to cover the tokenizer and copy its special ids into the config.

    Never shrinks: real checkpoints often pad the vocabulary beyond the tokenizer's size.
    Returns the model's vocabulary size afterwards.
    """
    n = len(tokenizer)
    if n > model.config.vocab_size:
        model.resize_token_embeddings(n)
    for name in ("pad", "bos", "eos"):
        tid = getattr(tokenizer, f"{name}_token_id", None)
        if tid is not None:
            setattr(model.config, f"{name}_token_id", tid)
            if model.generation_config is not None:
                setattr(model.generation_config, f"{name}_token_id", tid)
    return model.config.vocab_size
