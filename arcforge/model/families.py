"""Real chat templates and vocabularies of model families, taken from a published package.

PyPI's `llama-cpp-python` source distribution vendors llama.cpp, which keeps the chat templates
of many model families (`vendor/llama.cpp/models/templates/*.jinja`: Qwen3, GLM-4.6,
MiniMax-M2, Kimi-K2, Llama 3.1, ...) and vocabulary-only GGUFs (`models/ggml-vocab-*.gguf`).
`family_tokenizer(name)` gives a tokenizer with a family's real template and, where the package
ships it, its real vocabulary (Qwen's `qwen2`, Llama 3's `llama-bpe`); the other families use
SmolLM2's vocabulary as a declared stand-in (`Family.stand_in`), with the family's special tokens
added so that stop ids and masks fall on single tokens as with the real vocabulary. Nothing is
copied into the repository: the sdist is downloaded from the package index (pinned version and
sha256) into the cache on first use, and a converted vocabulary is saved there once
(`python -m arcforge.model.families` prepares everything ahead, as `make setup` does).

Cache: `$ARCFORGE_CACHE/families` (default `~/.cache/arcforge/families`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
INDEX = "https://pypi.org/simple/llama-cpp-python/"
_MODELS = "vendor/llama.cpp/models/"


@dataclass(frozen=True)
class Family:
    """template: the file under models/templates; vocab: a models/ggml-vocab-*.gguf, or None
    for SmolLM2's vocabulary as a stand-in."""

    name: str
    template: str | None
    vocab: str | None

    @property
    def stand_in(self) -> bool:
        return self.vocab is None and self.name != "smollm2"


FAMILIES = {
    f.name: f
    for f in (
        Family("qwen3", "Qwen-Qwen3-0.6B.jinja", "ggml-vocab-qwen2.gguf"),
        Family("glm46", "GLM-4.6.jinja", None),
        Family("minimax_m2", "MiniMax-M2.jinja", None),
        Family("kimi_k2", "moonshotai-Kimi-K2.jinja", None),
        Family("llama31", "meta-llama-Llama-3.1-8B-Instruct.jinja", "ggml-vocab-llama-bpe.gguf"),
        Family("smollm2", None, None),  # SmolLM2-135M-Instruct's own template and vocabulary
    )
}


def cache_dir() -> Path:
    root = os.environ.get("ARCFORGE_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "arcforge"
    return base / "families"


def _sdist_url() -> str:
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    for f in files:
        if f["filename"] == SDIST:
            return f["url"]
    raise RuntimeError(f"{SDIST} is not on the package index any more")


def models_dir() -> Path:
    """The extracted templates and vocabularies (downloaded and checked on first use)."""
    out = cache_dir() / "llama.cpp-models"
    if (out / "DONE").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    archive = tmp / SDIST
    with urllib.request.urlopen(_sdist_url(), timeout=600) as r, open(archive, "wb") as f:
        shutil.copyfileobj(r, f)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{SDIST}: sha256 {digest} is not the pinned {SDIST_SHA256}")
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            rel = m.name.split("/", 1)[-1]
            if not m.isfile() or not rel.startswith(_MODELS):
                continue
            name = rel[len(_MODELS) :]
            if name.startswith("templates/") or (
                name.startswith("ggml-vocab-") and name.endswith(".gguf")
            ):
                dest = tmp / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                dest.write_bytes(src.read())
    archive.unlink()
    (tmp / "DONE").write_text(SDIST + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


def template_text(family: str) -> str:
    f = FAMILIES[family]
    if f.template is None:
        raise ValueError(f"{family} uses its checkpoint's own template")
    return (models_dir() / "templates" / f.template).read_text()


def _vocab_tokenizer(vocab: str) -> Any:
    """The tokenizer of a vocabulary-only GGUF, converted once and saved in the cache."""
    from transformers import AutoTokenizer

    out = cache_dir() / "vocab" / vocab.removesuffix(".gguf")
    if not (out / "DONE").exists():
        tok = AutoTokenizer.from_pretrained(str(models_dir()), gguf_file=vocab)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tok.save_pretrained(str(tmp))
        (tmp / "DONE").write_text("ok")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    return AutoTokenizer.from_pretrained(str(out), local_files_only=True)


def _smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from arcforge.model.importer import real_checkpoint

    return AutoTokenizer.from_pretrained(
        str(real_checkpoint("smollm2-135m-instruct")), local_files_only=True
    )


def family_tokenizer(family: str) -> Any:
    """A tokenizer with `family`'s real chat template (see the module docstring)."""
    from arcforge.chat.dialects import detect_dialect

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; known: {sorted(FAMILIES)}")
    f = FAMILIES[family]
    tok = _vocab_tokenizer(f.vocab) if f.vocab else _smollm2_tokenizer()
    if f.template:
        tok.chat_template = template_text(family)
    dialect = detect_dialect(tok.chat_template)
    missing = [t for t in dialect.special_tokens if t not in tok.get_vocab()]
    if missing:
        tok.add_special_tokens(
            {"extra_special_tokens": missing}, replace_extra_special_tokens=False
        )
    return tok


def prepare() -> None:
    """Download and convert everything the family tests read (what `make setup` runs)."""
    models_dir()
    for f in FAMILIES.values():
        if f.vocab:
            _vocab_tokenizer(f.vocab)


if __name__ == "__main__":
    prepare()
    print(f"families ready in {cache_dir()}")
