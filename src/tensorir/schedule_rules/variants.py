"""Which kernels get multi-version CPU schedules (``tensorir/variants.py``), and under what conditions.

A matmul-like kernel whose row count is a symbol ``n`` has two regimes:
one row (decode, a batch of one) is a GEMV, where the weight is read once
and nothing is reused between rows, so the ``n == 1`` version is scheduled
by the GEMV rule (``gemv.py``: operand transposes inlined, columns split
over the threads); several rows are the gemm rule's register tiles. A
``n % TILE_I == 0`` version (the row tile divides ``n``: no guard on the
unrolled rows) is the regime ``rows_x4``, off by default: it measured no
gain (``benchmarks/bench_variants.py``).

Kernels reading quantized codes are left alone: their rule
(``quantized.py``) and the generated C choose per row count themselves.
"""
from __future__ import annotations

from .. import expr as E
from ..analysis.pattern import PatternKind, analyze_pattern
from ..function import PrimFunc
from ..schedule import Schedule
from ..variants import kernel_symbols, specialize
from .common import is_reduction_block, leaf_block_names, loop_extents, loop_kinds
from .gemm import TILE_I
from .gemv import FEW_ROWS, reduction_innermost

CODE_DTYPES = ("uint8", "int8")


def row_symbol(func: PrimFunc) -> E.Var | None:
    """The kernel symbol that is the row extent of ``func``'s single matmul-like block, if any."""
    if any(b.dtype in CODE_DTYPES for b in func.buffer_params) \
            or analyze_pattern(func) != PatternKind.OutputWiseFusible:
        return None
    sch = Schedule(func)
    reductions = [n for n in leaf_block_names(sch) if is_reduction_block(sch, n)]
    if len(reductions) != 1:
        return None
    loops = sch.get_loops(sch.get_block(reductions[0]))
    kinds = "".join(k or "-" for k in loop_kinds(sch, reductions[0], loops))
    if len(loops) < 3 or not kinds.endswith("SSR") or kinds.count("R") != 1:
        return None
    extent = loop_extents(sch, [loops[-3]])[0]
    symbols = {id(v) for v in kernel_symbols(func)}
    return extent if isinstance(extent, E.Var) and id(extent) in symbols else None


# regime name -> its condition on the row symbol, in selection order
REGIMES = {
    "one_row": lambda n: E.EQ(n, 1),
    "few_rows": lambda n: E.LE(n, FEW_ROWS),
    f"rows_x{TILE_I}": lambda n: E.EQ(E.floormod(n, TILE_I), 0),
}
DEFAULT_REGIMES = ("one_row", "few_rows")


def variant_regimes(func: PrimFunc, regimes=DEFAULT_REGIMES) -> list[tuple[E.PrimExpr, str]]:
    """``[(condition, regime name), ...]`` in selection order; empty when one schedule fits all."""
    unknown = [r for r in regimes if r not in REGIMES]
    if unknown:
        raise ValueError(f"unknown kernel variant regime(s) {unknown}; known: {', '.join(REGIMES)}")
    n = row_symbol(func) if regimes else None
    if n is None:
        return []
    chosen = [name for name in REGIMES if name in regimes]
    if "few_rows" in chosen and not reduction_innermost(func):
        chosen.remove("few_rows")   # a column-contiguous weight: the gemm rule's tiles from 2 rows on
    return [(REGIMES[name](n), name) for name in chosen]


def specialized_versions(func: PrimFunc, schedule, regimes=DEFAULT_REGIMES) -> list[tuple[E.PrimExpr, str, PrimFunc]]:
    """``(condition, regime, scheduled version)`` for each regime of ``func``; ``schedule`` is the
    rule chain (e.g. ``default_cpu_schedule``), run on the version that knows its condition."""
    return [(cond, name, schedule(specialize(func, cond))) for cond, name in variant_regimes(func, regimes)]
