"""`arcforge world`: generate a run config's world and write it as files to audit.

Heavy imports stay inside the function so `arcforge --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from arcforge.cli.shared import ConfigArg, load_run_config, setup_world


def world_cmd(
    args: list[str] = ConfigArg,
    out: Path = typer.Option(Path("runs/world"), "--out", help="Directory to write."),
) -> None:
    """Generate the embedded world (corpus, task pools, SFT demos), print its sizes, and write it
    as files to audit: DIR/suites/<suite>/{train,test}.jsonl (id, prompt, reference),
    DIR/text/<source>.jsonl (every text the config's training stages read) and the config."""
    from arcforge.audit.contamination import eval_counts
    from arcforge.audit.export import export_world
    from arcforge.run_config import dump_config

    cfg = load_run_config(args)
    w = setup_world(cfg)
    w.save(out)
    docs = w.corpus()
    typer.echo(
        f"world written to {out}: {len(docs)} corpus docs, "
        f"{sum(len(d.text) for d in docs) / 1e6:.2f} MB text, {len(w.sft_demos())} demos"
    )
    summary = export_world(w, out, cfg.stages, counts=eval_counts(cfg.eval))
    (out / "run_config.yaml").write_text(dump_config(cfg))  # what `eval contamination` reads
    for s, n in summary["suites"].items():
        typer.echo(f"  suite {s}: {n['train']} train / {n['test']} test  -> {out}/suites/{s}/")
    for m in summary["text"].values():
        note = f"  (not read: {m['missing']})" if m["missing"] else ""
        typer.echo(f"  text {m['file']}: {m['texts']} texts, {m['chars'] / 1e6:.2f} MB{note}")
