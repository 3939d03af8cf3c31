"""Tokenizer training/loading, model presets and checkpoint I/O."""
