"""Rule-based default schedules: ``default_cpu_schedule(func)`` picks a rule
(elementwise, row reduction, GEMM) from the function's pattern kind."""
from .cpu import SCHEDULED_ATTR, default_cpu_schedule, rules_for, schedule_outer_parallel
from .elementwise import schedule_elementwise, schedule_spatial_block
from .gemm import schedule_gemm
from .reduction import schedule_reduction

__all__ = ["default_cpu_schedule", "SCHEDULED_ATTR", "rules_for", "schedule_elementwise",
           "schedule_spatial_block", "schedule_reduction", "schedule_gemm", "schedule_outer_parallel"]
