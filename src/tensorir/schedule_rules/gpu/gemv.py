"""The GPU GEMV rule: single-row matmuls, the decode case ``(1, k) x (k, m)``.

Applies when, after spatial producers (a transpose, a dequantization) are
inlined, the function's one reduction block has loops ``S... R`` (spatial
then one reduction loop) where every spatial loop but the innermost has the
constant extent 1, and the reduction loop is longer than one warp. Stages
after the matmul (bias, activation) are scheduled like the injective rule,
each as its own launch.

Schedule, by the weight's layout (the operand indexed by the output column):
- reduction index innermost (``W[j, k]``, a transposed linear weight): one
  output per block (blockIdx.x), the threads split ``k`` (threadIdx.x
  outermost, so consecutive threads read consecutive weights) and combine
  their partial sums in a cross-thread reduction;
- output column innermost (``W[k, j]``): threads over the columns (reads
  coalesced across threads), each thread sums its column serially.
"""
from __future__ import annotations

from ...errors import ScheduleError
from ...expr import BufferLoad, Var
from ...functor import collect
from ...schedule import Schedule
from ...schedule.state import StmtIndex
from ..common import (const_int, inline_spatial_intermediates, is_reduction_block, leaf_block_names,
                      loop_extents, loop_kinds)
from .common import MIN_THREADS, bind_spatial_nest, row_thread_count


def _reduce_index_innermost(sch: Schedule, name: str) -> bool:
    """The operand read with the output's column reads along the reduction index."""
    block = StmtIndex(sch.func).realize(name).block
    column = next(iv.var for iv in reversed(block.iter_vars) if iv.kind == "S")
    reduce_var = next(iv.var for iv in block.iter_vars if iv.kind == "R")
    written = {id(w.buffer) for w in block.writes}
    for load in collect(block.body, lambda n: isinstance(n, BufferLoad)):
        if id(load.buffer) in written or not load.indices:
            continue
        uses_column = any(collect(i, lambda n: n is column) for i in load.indices)
        if uses_column:
            last = load.indices[-1]
            return isinstance(last, Var) and last is reduce_var
    return False


def schedule_gemv(sch: Schedule) -> None:
    inline_spatial_intermediates(sch)
    names = leaf_block_names(sch)
    reductions = [n for n in names if is_reduction_block(sch, n)]
    if len(reductions) != 1 or names.index(reductions[0]) != 0:
        raise ScheduleError(f"gemv rule: expected one leading reduction block, found {reductions}")
    name = reductions[0]
    loops = sch.get_loops(sch.get_block(name))
    kinds = loop_kinds(sch, name, loops)
    if len(loops) < 2 or kinds != ["S"] * (len(loops) - 1) + ["R"]:
        raise ScheduleError(f"gemv rule: block {name!r} loops are {kinds!r}, expected S...R")
    extents = loop_extents(sch, loops)
    if any(const_int(e) != 1 for e in extents[:-2]):
        raise ScheduleError(f"gemv rule: block {name!r} computes more than one row")
    k_extent = const_int(extents[-1])
    if k_extent is not None and k_extent < MIN_THREADS:
        raise ScheduleError(f"gemv rule: reduction of {k_extent} is too short to split over threads")
    if _reduce_index_innermost(sch, name):
        *spatial, k = loops
        column = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        sch.bind(column, "blockIdx.x")
        serial, thread = sch.split(k, [None, row_thread_count(extents[-1:])])
        sch.reorder(thread, serial)
        sch.bind(thread, "threadIdx.x")
    else:
        bind_spatial_nest(sch, loops[:-1])
    for epilogue in names[1:]:
        epilogue_loops = sch.get_loops(sch.get_block(epilogue))
        if epilogue_loops:
            bind_spatial_nest(sch, epilogue_loops)
