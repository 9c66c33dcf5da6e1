"""Rule for a matmul-like block with one row (``i`` extent 1: decode, or the ``n == 1``
variant of a symbolic-``n`` kernel, see ``variants.py``): a GEMV; and for a few rows
(the ``n <= FEW_ROWS`` variant) of a weight stored with the reduction axis innermost.

With one row there is no reuse of the weight between rows, so the rule
differs from ``gemm.py`` in two ways. Producers of the operands (a fused
transpose of the weight) are inlined: the gemm rule materializes them once
for all rows, which for one row is an extra pass over the whole weight.
The work is split over the output columns only, in the order the weight
is stored: when the weight's innermost index is the reduction axis (``x @
W.T``, nn.Linear's layout) each column is a dot product over contiguous
memory (the reduction stays innermost; the C emitter gives it a SIMD
accumulator); when it is the column axis (``x @ W``) each task streams a
block of ``COLUMN_TILE`` columns row by row into a vectorized partial row.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import Var
from ..functor import collect
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from .common import (attempt, const_int, inline_spatial_intermediates, is_reduction_block, leaf_block_names,
                     loop_extents, loop_kinds, vector_chunk)

# columns one task streams in the column-contiguous form: 64 floats (8 AVX registers) per weight row
COLUMN_TILE = 64
# rows up to which the dot-product form (weight rows reused from L1 by every row) beats the gemm
# rule's copy of a transposed weight (benchmarks/bench_variants.py)
FEW_ROWS = 16


def few_rows(extent) -> bool:
    """A symbolic row count known (a fact of the ``n <= FEW_ROWS`` variant) to be small."""
    return isinstance(extent, Var) and extent.upper is not None and extent.upper <= FEW_ROWS


def _contiguous_axis(sch: Schedule, name: str, j_var, k_var) -> str:
    """'k' when the weight's (the operand indexed by the column loop) last index moves with the
    reduction loop, 'j' when it moves with the column loop."""
    realize = StmtIndex(sch.func).realize(name)
    block = realize.block
    binding = {id(iv.var): value for iv, value in zip(block.iter_vars, realize.iter_values)}

    def loops_of(expr) -> set:
        return {id(v) for bv in collect(expr, _is_var) if id(bv) in binding
                for v in collect(binding[id(bv)], _is_var)}
    written = {id(w.buffer) for w in block.writes}
    for read in block.reads:
        if id(read.buffer) in written or not read.region:
            continue
        if id(j_var) in set().union(*(loops_of(r.min) for r in read.region)):
            last = loops_of(read.region[-1].min)
            if id(k_var) in last:
                return "k"
            if id(j_var) in last:
                return "j"
    raise ScheduleError("gemv rule: no operand's last index follows the column or the reduction loop")


def _is_var(node) -> bool:
    return isinstance(node, Var)


def schedule_gemv(sch: Schedule) -> None:
    inline_spatial_intermediates(sch)
    names = leaf_block_names(sch)
    reductions = [n for n in names if is_reduction_block(sch, n)]
    if len(reductions) != 1:
        raise ScheduleError(f"gemv rule: expected one reduction block, found {reductions}")
    name = reductions[0]
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = loop_kinds(sch, name, loops)
    if not "".join(kinds).endswith("SSR") or kinds.count("R") != 1 or "" in kinds:
        raise ScheduleError(f"gemv rule: block {name!r} loops are {''.join(kinds)!r}, expected [S...]SSR")
    *batch, i, j, k = loops
    extent_i, extent_j = loop_extents(sch, [i, j])
    one_row = const_int(extent_i) == 1
    if not one_row and not few_rows(extent_i):
        raise ScheduleError(f"gemv rule: the row extent is neither 1 nor at most {FEW_ROWS}")
    axis = _contiguous_axis(sch, name, sch._loop_var(j), sch._loop_var(k))
    epilogues = names[names.index(name) + 1:]
    if axis == "k":
        # dot products: each task owns columns; the rows run inside, so a weight row is read
        # from memory once and reused from L1 by every row; the reduction innermost
        sch.reorder(j, i)
        for epilogue in epilogues:
            attempt(sch.reverse_compute_at, sch.get_block(epilogue), j)
        sch.parallel(sch.fuse(*batch, j) if batch else j)
        return
    if not one_row:
        raise ScheduleError("gemv rule: several rows of a column-contiguous weight are the gemm rule's")
    tile = COLUMN_TILE if const_int(extent_j) is None else min(COLUMN_TILE, const_int(extent_j))
    j_outer, j_inner = sch.split(j, [None, tile])
    sch.reorder(j_outer, k, i, j_inner)
    for epilogue in epilogues:
        attempt(sch.reverse_compute_at, sch.get_block(epilogue), j_outer)
    attempt(sch.decompose_reduction, block, k)
    if vector_chunk(loop_extents(sch, [j_inner])[0]) is not None:
        attempt(sch.vectorize, j_inner)
    sch.parallel(sch.fuse(*batch, j_outer))
    for epilogue in epilogues:
        inner = sch.get_loops(sch.get_block(epilogue))[-1]
        if vector_chunk(loop_extents(sch, [inner])[0]) is not None:
            attempt(sch.vectorize, inner)


def reduction_innermost(func) -> bool:
    """Whether ``func``'s matmul block, with operand producers inlined, reads its weight with the
    reduction axis innermost (the layout where the dot-product form serves a few rows)."""
    sch = Schedule(func)
    try:
        inline_spatial_intermediates(sch)
        reductions = [n for n in leaf_block_names(sch) if is_reduction_block(sch, n)]
        if len(reductions) != 1:
            return False
        *_, j, k = sch.get_loops(sch.get_block(reductions[0]))
        return _contiguous_axis(sch, reductions[0], sch._loop_var(j), sch._loop_var(k)) == "k"
    except ScheduleError:
        return False
