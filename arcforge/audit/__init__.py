"""Audits of a world and a run: the world as files, what training reads, contamination of
held-out items, and the trivial baselines every score is read against.

This package sits above the stage layer (it resolves sources through the stages' own
resolver), beside the pipeline and the report that use it; nothing below imports it.
"""
