"""Data sources, corpus curation, packing and mid-training data."""
