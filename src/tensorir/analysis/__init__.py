"""Analyses of loop programs."""
from .pattern import PatternKind, analyze_pattern, block_pattern  # noqa: F401
