"""Audits of a world and a run: the world as files, what training reads, contamination of
held-out items, and the trivial baselines every score is read against; `checks` runs a run's
audits, which the report then renders.

This package sits above the stage layer (it resolves sources through the stages' own
resolver), beside the pipeline, the report and the CLI that use it; nothing below imports it.
"""
