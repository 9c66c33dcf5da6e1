"""Analyses of graph-level IR."""
from .well_formed import check_well_formed, well_formed

__all__ = ["check_well_formed", "well_formed"]
