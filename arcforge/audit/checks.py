"""A run's audits: the contamination check and the trivial baselines, measured on its saved world.

`run_audits(run_dir)` measures each audit once per run and caches it under RUN_DIR/checks/
(checks/contamination.json, checks/baselines.json), where the report reads it; a run without a
saved world yet has neither. The pipeline runs the audits before it writes the report, and so do
`arcforge report` and `arcforge eval RUN_DIR`. An audit that fails is reported in one line that
names it and left out: the rest of a finished run's report is still written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from arcforge.audit.baselines import run_baselines
from arcforge.audit.contamination import run_contamination

# each audit's name (its file under RUN_DIR/checks/) and what measures it
AUDITS: tuple[tuple[str, Callable[[Path], Any]], ...] = (
    ("contamination", run_contamination),
    ("baselines", run_baselines),
)


def run_audits(run_dir: Path) -> dict[str, str]:
    """Measure every audit of `run_dir` that is not cached yet (nothing outside a run dir).

    Args:
        run_dir: the run directory (its config.yaml and saved world).
    Returns:
        {audit name: "ErrorType: message"} for each audit that failed (empty when none did).
    """
    failed: dict[str, str] = {}
    if not (run_dir / "config.yaml").exists():
        return failed
    for name, measure in AUDITS:
        try:
            measure(run_dir)
        except Exception as err:  # noqa: BLE001 - a finished run's report is written regardless
            failed[name] = f"{type(err).__name__}: {err}"
            print(f"[audit] {name} check skipped: {failed[name]}")
    return failed
