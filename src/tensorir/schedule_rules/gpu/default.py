"""default_gpu_schedule: pick GPU rules from the function's pattern kind and
apply the first that fits.

Each rule runs on a fresh Schedule; a rule whose primitives do not apply
(``ScheduleError``) falls back to the next, ending with the fallback rule,
which never fails, so the result is always a semantically equal function.
The result is marked ``{"tir.is_scheduled": True}`` and names the rule that
scheduled it under ``"tir.gpu_schedule_rule"`` (the statistics of
DefaultGPUSchedule count these).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from ...analysis.pattern import PatternKind, analyze_pattern
from ...errors import ScheduleError
from ...function import PrimFunc
from ...schedule import Schedule
from ...stmt import has_loop_jumps
from ..common import is_reduction_block, leaf_block_names
from ..cpu import SCHEDULED_ATTR
from .fallback import schedule_fallback
from .gemv import schedule_gemv
from .injective import schedule_injective
from .matmul import schedule_matmul
from .row_reduction import schedule_row_reduction

GPU_RULE_ATTR = "tir.gpu_schedule_rule"


class GPURule(NamedTuple):
    name: str
    apply: Callable[[Schedule], None]


INJECTIVE = GPURule("injective", schedule_injective)
ROW_REDUCTION = GPURule("row_reduction", schedule_row_reduction)
GEMV = GPURule("gemv", schedule_gemv)
MATMUL = GPURule("matmul", schedule_matmul)
FALLBACK = GPURule("fallback", schedule_fallback)
GPU_RULES = (INJECTIVE, ROW_REDUCTION, GEMV, MATMUL, FALLBACK)


def gpu_rules_for(func: PrimFunc) -> list[GPURule]:
    """The rules to try on ``func``, most specific first, ending with the fallback."""
    kind = analyze_pattern(func)
    if kind <= PatternKind.Injective:
        return [INJECTIVE, FALLBACK]
    if kind == PatternKind.Reduction:
        return [ROW_REDUCTION, FALLBACK]
    sch = Schedule(func)  # matmul-like or opaque: by the blocks it holds
    if any(is_reduction_block(sch, n) for n in leaf_block_names(sch)):
        return [GEMV, MATMUL, ROW_REDUCTION, FALLBACK]
    return [INJECTIVE, FALLBACK]


def default_gpu_schedule(func: PrimFunc) -> PrimFunc:
    """``func`` scheduled for a GPU: loops bound to blockIdx/threadIdx (unchanged
    when already marked scheduled or when it holds no blocks)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_gpu_schedule expects a PrimFunc, got {type(func).__name__}")
    if func.attrs.get(SCHEDULED_ATTR):
        return func
    if has_loop_jumps(func.body):
        return func  # loops a break/continue leaves run as written
    if not leaf_block_names(Schedule(func)):
        return func  # lowered or opaque code: nothing a rule can read
    for rule in gpu_rules_for(func):
        sch = Schedule(func)
        try:
            rule.apply(sch)
        except ScheduleError:
            continue
        return sch.func.with_attr(SCHEDULED_ATTR, True).with_attr(GPU_RULE_ATTR, rule.name)
    # the fallback catches its own failures; this is reached only if it raised anyway
    return func.with_attr(SCHEDULED_ATTR, True).with_attr(GPU_RULE_ATTR, "unscheduled")
