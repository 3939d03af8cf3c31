"""Data synthesis: rejection sampling for reasoning SFT (and, later, the agentic producers)."""
