"""Rule for row reductions (softmax, layer/rms norm, sums over trailing axes).

One row per parallel task: elementwise producers are inlined, every stage
is computed at the row loop of the last block, the row loops are fused and
parallelized, inits are hoisted, and inner spatial loops are vectorized.

Reductions are not rfactored: the C emitter turns an innermost reduction
loop into an ``omp simd reduction`` over a register accumulator
(backends/c/accumulate.py). An rfactored ``VECTOR_LANES``-wide partial
buffer vectorizes too, but gcc keeps it in memory, so every step waits on
a store-to-load round trip (measured: the norm/softmax kernel took 0.91 ms
at n=512 with rfactor, 0.84 ms without).
"""
from __future__ import annotations

from ..schedule import Schedule
from .stage_in_output import find_output_stageable, store_in_output
from .common import (attempt, inline_spatial_intermediates, is_reduction_block,
                     leaf_block_names, loop_extents, loop_kinds, vector_chunk)


def _row_count(sch: Schedule, anchor: str, names: list[str]) -> int:
    """How many leading loops of the anchor block enumerate rows."""
    kinds = loop_kinds(sch, anchor, sch.get_loops(sch.get_block(anchor)))
    spatial_prefix = next((i for i, k in enumerate(kinds) if k != "S"), len(kinds))
    reduced = 0
    for name in names:
        if name != anchor and is_reduction_block(sch, name):
            loops = sch.get_loops(sch.get_block(name))
            reduced = max(reduced, loop_kinds(sch, name, loops).count("R"))
    if is_reduction_block(sch, anchor):
        return spatial_prefix
    # an elementwise op after a full reduction has no loops at all: no rows
    return min(len(kinds), max(1, min(spatial_prefix, len(kinds) - reduced)))


def _hoist_init(sch: Schedule, name: str) -> None:
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = loop_kinds(sch, name, loops)
    if "R" in kinds:
        attempt(sch.decompose_reduction, block, loops[kinds.index("R")])


def _vectorize_inner(sch: Schedule, name: str) -> None:
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if len(loops) < 2 or loop_kinds(sch, name, loops)[-1] != "S":
        return
    if vector_chunk(loop_extents(sch, loops)[-1]) is not None:
        attempt(sch.vectorize, loops[-1])


def schedule_reduction(sch: Schedule):
    """Schedule row reductions one row per task. Returns a rewrite to apply to the
    scheduled function afterwards (see stage_in_output.py), or None."""
    staged = find_output_stageable(sch.func)
    inline_spatial_intermediates(sch, frozenset(id(mid) for mid in staged[0]) if staged else frozenset())
    names = leaf_block_names(sch)
    anchor = names[-1]
    rows = _row_count(sch, anchor, names)
    if rows > 0:
        anchor_loops = sch.get_loops(sch.get_block(anchor))
        row_loop = anchor_loops[rows - 1]
        for name in reversed(names[:-1]):
            sch.compute_at(sch.get_block(name), row_loop)
        fused = sch.fuse(*anchor_loops[:rows]) if rows > 1 else anchor_loops[0]
        sch.parallel(fused)
    # rows == 0: a full reduction (and ops on its scalar); one task, stages in program order
    for name in leaf_block_names(sch):
        if is_reduction_block(sch, name):
            _hoist_init(sch, name)
        else:
            _vectorize_inner(sch, name)
    if staged and rows == staged[1].ndim - 1:
        # every stage now runs one row at a time, so the shared intermediate may live in the
        # output row: a plain IR rewrite after scheduling (no schedule primitive moves a
        # buffer into a function parameter, so it is not part of the trace)
        return lambda func: store_in_output(func, *staged)
    return None
