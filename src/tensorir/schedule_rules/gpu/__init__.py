"""Rule-based default GPU schedules for symbolic shapes (in the spirit of
upstream's dlight): ``default_gpu_schedule(func)`` binds a function's loops
to blockIdx/threadIdx with the first rule that applies (injective, row
reduction, GEMV, tiled matmul, fallback). Each rule's module says when it
applies."""
from .default import (FALLBACK, GEMV, GPU_RULE_ATTR, GPU_RULES, INJECTIVE, MATMUL, ROW_REDUCTION, GPURule,
                      default_gpu_schedule, gpu_rules_for)

__all__ = ["default_gpu_schedule", "gpu_rules_for", "GPURule", "GPU_RULES", "GPU_RULE_ATTR", "INJECTIVE",
           "ROW_REDUCTION", "GEMV", "MATMUL", "FALLBACK"]
