"""Analyses of graph-level IR."""
from .well_formed import check_well_formed, well_formed

__all__ = ["check_well_formed", "well_formed"]
from .fusion_summary import KernelSummary, fusion_summary, fusion_table  # noqa: E402,F401
from .memory_plan import memory_plan, memory_plan_info  # noqa: F401,E402
