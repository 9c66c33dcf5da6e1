"""Rule for row reductions (softmax, layer/rms norm, sums over trailing axes).

One row per parallel task: elementwise producers are inlined, each
reduction whose innermost reduction loop is a constant multiple of the
vector width is rfactored into ``VECTOR_LANES`` partial results (so the
partial sums vectorize without reassociating floats), every stage is
computed at the row loop of the last block, the row loops are fused and
parallelized, inits are hoisted, and inner spatial loops are vectorized.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from .stage_in_output import find_output_stageable, store_in_output
from .common import (VECTOR_LANES, attempt, const_int, inline_spatial_intermediates, is_reduction_block,
                     leaf_block_names, loop_extents, loop_kinds, vector_chunk)

# below this many elements per row the partial-sum stage costs more than it saves
MIN_RFACTOR_EXTENT = 4 * VECTOR_LANES


def _rfactor_inner(sch: Schedule, name: str) -> str | None:
    """Split the innermost reduction loop by VECTOR_LANES and rfactor it; the new block's name."""
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if not loops or loop_kinds(sch, name, loops)[-1] != "R":
        return None
    extent = const_int(loop_extents(sch, loops)[-1])
    if extent is None or extent < MIN_RFACTOR_EXTENT or extent % VECTOR_LANES:
        return None
    _, inner = sch.split(loops[-1], [None, VECTOR_LANES])
    out_ndim = StmtIndex(sch.func).realize(name).block.writes[0].buffer.ndim
    try:  # the partial-result axis goes last, so one row's partials are contiguous
        rf = sch.rfactor(inner, out_ndim)
    except ScheduleError:
        return None
    return sch._block_name(rf)


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
    return max(1, min(spatial_prefix, len(kinds) - reduced))


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
    inline_spatial_intermediates(sch, frozenset([id(staged[0])]) if staged else frozenset())
    names = leaf_block_names(sch)
    anchor = names[-1]
    partials = [rf for name in names if is_reduction_block(sch, name)
                for rf in [_rfactor_inner(sch, name)] if rf is not None]
    names = leaf_block_names(sch)
    rows = _row_count(sch, anchor, names)
    if rows == 0:
        raise ScheduleError(f"reduction rule: block {anchor!r} has no row loop")
    anchor_loops = sch.get_loops(sch.get_block(anchor))
    row_loop = anchor_loops[rows - 1]
    for name in reversed(names[:-1]):
        sch.compute_at(sch.get_block(name), row_loop)
    fused = sch.fuse(*anchor_loops[:rows]) if rows > 1 else anchor_loops[0]
    sch.parallel(fused)
    for name in leaf_block_names(sch):
        if name in partials:
            block = sch.get_block(name)
            loops = sch.get_loops(block)
            attempt(sch.decompose_reduction, block, loops[-2])
            attempt(sch.vectorize, sch.get_loops(block)[-1])
        elif is_reduction_block(sch, name):
            _hoist_init(sch, name)
        else:
            _vectorize_inner(sch, name)
    if staged and rows == staged[0].ndim - 1:
        # every stage now runs one row at a time, so the shared intermediate may live in the
        # output row: a plain IR rewrite after scheduling (no schedule primitive moves a
        # buffer into a function parameter, so it is not part of the trace)
        return lambda func: store_in_output(func, *staged)
    return None
