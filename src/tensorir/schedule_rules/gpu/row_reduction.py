"""The GPU row-reduction rule: softmax, layer norm, RMS norm, sums/means over
trailing axes, and chains of them (BladeDISC's stitched norm -> softmax).

Applies when, after spatial intermediates are inlined, every stage can be
computed at the row loop of the last stage: the last stage's leading
spatial loops enumerate rows (at least one), every reduction block reduces
only loops below its row loops, and every stage keeps at least one loop of
its own under the row (a stage writing one value per row with no loop
left would be run by every thread; the fallback takes such functions).

Schedule: all stages move under the last stage's row loops, which are fused
and bound to blockIdx.x (one row per block, so the whole chain is ONE
kernel). In every stage the loops under the row are fused, split by one
constant thread count ``T`` shared by the kernel, and the ``T`` part is put
outermost and bound to threadIdx.x, so consecutive threads touch
consecutive elements. A reduction stage's bound loop is a reduction loop:
a cross-thread reduction, which the lowering turns into a tree or warp
shuffles; its one-value-per-row result lives in "shared" memory.
"""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule import Schedule
from ..common import (const_int, inline_spatial_intermediates, is_reduction_block, leaf_block_names,
                      loop_extents, loop_kinds, writes_param)
from .common import leading_spatial, row_thread_count


def _row_loop_count(sch: Schedule, anchor: str, names: list[str]) -> int:
    loops = sch.get_loops(sch.get_block(anchor))
    rows = leading_spatial(sch, anchor, loops)
    if not is_reduction_block(sch, anchor):
        # the last stage is elementwise over the rows: its trailing loops, as many as the
        # widest reduction reduces, run inside the row
        reduced = max(loop_kinds(sch, n, sch.get_loops(sch.get_block(n))).count("R")
                      for n in names if is_reduction_block(sch, n))
        rows = min(rows, len(loops) - reduced)
    if rows <= 0:
        raise ScheduleError("row reduction rule: no row loop (a full reduction)")
    return rows


def _inner_loops(sch: Schedule, name: str, rows: int):
    """The block's loops under the row that carry work, checked to be all spatial
    (elementwise stage) or all reduction (reduction stage); unit loops are skipped."""
    loops = sch.get_loops(sch.get_block(name))[rows:]
    kinds = loop_kinds(sch, name, loops)
    extents = loop_extents(sch, loops)
    wanted = "R" if is_reduction_block(sch, name) else "S"
    inner = []
    for loop, kind, extent in zip(loops, kinds, extents):
        if const_int(extent) == 1 and not inner:
            continue
        if kind != wanted:
            raise ScheduleError(f"row reduction rule: block {name!r} has a {kind or 'free'} loop "
                                f"under the row where {wanted} loops were expected")
        inner.append(loop)
    if not inner:
        raise ScheduleError(f"row reduction rule: block {name!r} has no loop under the row")
    return inner


def schedule_row_reduction(sch: Schedule) -> None:
    names = leaf_block_names(sch)
    if not any(is_reduction_block(sch, n) for n in names):
        raise ScheduleError("row reduction rule: no reduction block")
    inline_spatial_intermediates(sch)
    names = leaf_block_names(sch)
    anchor = names[-1]
    kept = [n for n in names[:-1] if not is_reduction_block(sch, n)]
    if kept:
        # its row would be written by some threads and read by others through global memory
        raise ScheduleError(f"row reduction rule: elementwise stage(s) {kept} could not be inlined")
    rows = _row_loop_count(sch, anchor, names)
    anchor_loops = sch.get_loops(sch.get_block(anchor))
    for name in reversed(names[:-1]):
        sch.compute_at(sch.get_block(name), anchor_loops[rows - 1])
    inner = {name: _inner_loops(sch, name, rows) for name in names}
    threads = row_thread_count([e for loops in inner.values() for e in loop_extents(sch, loops)])
    row = sch.fuse(*anchor_loops[:rows]) if rows > 1 else anchor_loops[0]
    sch.bind(row, "blockIdx.x")
    for name in names:
        loops = inner[name]  # found before the row loops were fused
        fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        serial, thread = sch.split(fused, [None, threads])
        sch.reorder(thread, serial)
        sch.bind(thread, "threadIdx.x")
        if is_reduction_block(sch, name) and not writes_param(sch, name):
            sch.set_scope(sch.get_block(name), 0, "shared")
