"""default_cpu_schedule: pick a rule from the function's pattern kind and apply it.

Each rule runs on a fresh Schedule; a rule whose primitives do not apply
(``ScheduleError``) falls back to the next, ending with the plain parallel
rule, so the result is always a semantically equal function. The result is
marked ``{"tir.is_scheduled": True}``.
"""
from __future__ import annotations

from ..analysis.pattern import PatternKind, analyze_pattern
from ..errors import ScheduleError
from ..function import PrimFunc
from ..schedule import Schedule
from ..stmt import has_loop_jumps
from .common import attempt, is_reduction_block, leaf_block_names, loop_kinds
from .attention import ATTENTION_ATTR, schedule_attention
from .elementwise import schedule_elementwise
from .gemm import schedule_gemm
from .gemv import schedule_gemv
from .quantized import schedule_quantized_gemm
from .reduction import schedule_reduction

SCHEDULED_ATTR = "tir.is_scheduled"


def schedule_outer_parallel(sch: Schedule) -> None:
    """Last resort: parallelize each block's leading spatial loops."""
    for name in leaf_block_names(sch):
        loops = sch.get_loops(sch.get_block(name))
        kinds = loop_kinds(sch, name, loops)
        leading = next((i for i, k in enumerate(kinds) if k != "S"), len(kinds))
        if leading:
            attempt(sch.parallel, loops[0])


def rules_for(func: PrimFunc) -> list:
    if func.attrs.get(ATTENTION_ATTR):
        return [schedule_attention, schedule_outer_parallel]
    kind = analyze_pattern(func)
    if kind <= PatternKind.Injective:
        return [schedule_elementwise, schedule_outer_parallel]
    if kind == PatternKind.OutputWiseFusible:
        return [schedule_quantized_gemm, schedule_gemv, schedule_gemm, schedule_reduction, schedule_outer_parallel]
    if kind == PatternKind.Reduction:
        return [schedule_reduction, schedule_outer_parallel]
    sch = Schedule(func)  # Opaque: a mix; rules by block kinds
    if any(is_reduction_block(sch, n) for n in leaf_block_names(sch)):
        return [schedule_gemv, schedule_gemm, schedule_reduction, schedule_outer_parallel]
    return [schedule_elementwise, schedule_outer_parallel]


def default_cpu_schedule(func: PrimFunc) -> PrimFunc:
    """``func`` scheduled for a multi-core CPU with vector units (unchanged
    when already marked scheduled or when it holds no blocks)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_cpu_schedule expects a PrimFunc, got {type(func).__name__}")
    if func.attrs.get(SCHEDULED_ATTR):
        return func
    if has_loop_jumps(func.body):
        return func  # loops a break/continue leaves run as written, one iteration at a time
    if not leaf_block_names(Schedule(func)):
        return func  # lowered or opaque code: nothing a rule can read
    for rule in rules_for(func):
        sch = Schedule(func)
        try:
            rewrite = rule(sch)
        except ScheduleError:
            continue
        scheduled = rewrite(sch.func) if rewrite is not None else sch.func
        return scheduled.with_attr(SCHEDULED_ATTR, True)
    return func.with_attr(SCHEDULED_ATTR, True)
