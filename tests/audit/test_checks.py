"""The run's audits: measured before the report, and a failing one is a named line, not a crash."""

from __future__ import annotations

import json

from arcforge.audit import checks
from arcforge.audit.checks import run_audits
from arcforge.report import write_report


def test_a_failing_audit_is_named_and_the_report_still_renders(tmp_path, monkeypatch, capsys):
    def broken(run_dir):
        raise RuntimeError("no index")

    measured = []
    monkeypatch.setattr(
        checks, "AUDITS", (("contamination", broken), ("baselines", measured.append))
    )
    (tmp_path / "config.yaml").write_text("name: t\nstages: []\n")
    assert run_audits(tmp_path) == {"contamination": "RuntimeError: no index"}
    assert measured == [tmp_path]  # the next audit still runs
    assert "[audit] contamination check skipped: RuntimeError: no index" in capsys.readouterr().out
    write_report(tmp_path)
    assert json.loads((tmp_path / "report.json").read_text())["contamination"] is None


def test_nothing_is_measured_outside_a_run_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "AUDITS", (("contamination", lambda d: 1 / 0),))
    assert run_audits(tmp_path) == {}
