"""`arcforge train-rm`: an outcome reward model trained on preference pairs, outside a run.

Heavy imports stay inside the function so `arcforge --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from arcforge.cli.shared import source_loader
from arcforge.errors import UserError


def train_rm_cmd(
    checkpoint: Path = typer.Argument(..., help="Causal-LM checkpoint the reward model starts at."),
    out: Path = typer.Option(..., "--out", help="Reward model directory to write."),
    source: list[str] = typer.Option(
        ["world:preferences"],
        "--source",
        help="Preference pairs: world:preferences or jsonl:<file> of {prompt, chosen, rejected}.",
    ),
    heldout: str = typer.Option("world:preferences:test", help="Held-out pairs ('' for none)."),
    config: Path = typer.Option(None, help="Run config whose world resolves world: sources."),
    steps: int = typer.Option(150),
    batch_size: int = typer.Option(16),
    lr: float = typer.Option(5e-4),
    max_len: int = typer.Option(256, help="Tokens kept per prompt + reply (the end is kept)."),
    seed: int = typer.Option(0),
) -> None:
    """Train an outcome reward model (scalar head, Bradley-Terry loss) on preference pairs."""
    import json

    from pydantic import ValidationError

    from arcforge.data.sources import load_records
    from arcforge.train.reward_model import RewardModelCfg, train_rm_from_checkpoint

    if not (checkpoint / "config.json").exists():
        raise UserError(f"{checkpoint} is not a checkpoint directory (no config.json)")
    try:
        cfg = RewardModelCfg(
            sources=[{"source": s} for s in source],
            heldout=heldout or None,
            steps=steps,
            batch_size=batch_size,
            max_len=max_len,
            seed=seed,
            optim={"lr": lr, "warmup_steps": min(10, steps // 5), "weight_decay": 0.0},
        )
    except ValidationError as err:
        e = err.errors()[0]
        raise UserError(f"train-rm: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    specs = [s.source for s in cfg.sources] + [heldout or ""]
    world = any(s.startswith("world:") for s in specs)
    load = source_loader(config) if world else load_records
    summary = train_rm_from_checkpoint(checkpoint, cfg, out, load=load)
    typer.echo(json.dumps({"out": str(out), **summary}, default=float))
