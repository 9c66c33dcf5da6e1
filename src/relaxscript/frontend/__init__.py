"""Readers of model files from other ecosystems (GGUF)."""
