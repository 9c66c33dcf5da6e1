"""Rule for spatial (elementwise / broadcast / injective) loop nests.

Per output block: the innermost loop is cut into a vector chunk (a guarded
split when the extent is symbolic or not a multiple), every loop above the
chunk is fused into one parallel loop, and the chunk is vectorized. Inner
extents too short for a vector register are fused into the parallel loop.

An inner axis that a load reads through ``v // d`` and ``v % d`` (a reshape
that merges axes after a transpose: attention heads back into the hidden
width) is first split by ``d``, so the vector loop reads ``d`` contiguous
elements instead of computing a division per lane (gcc then emits gathers).
"""
from __future__ import annotations

from .. import expr as E
from ..functor import collect
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from .common import (VECTOR_LANES, const_int, inline_spatial_intermediates, leaf_block_names, loop_extents,
                     vector_chunk)

# constant trips above a symbolic chunk loop that are enough to share among the threads on their own
MIN_PARALLEL_TRIPS = 16


def regrouping_divisor(sch: Schedule, name: str, inner_extent) -> int | None:
    """The largest constant ``d`` (at least a vector of lanes, dividing the inner loop's constant
    extent, smaller than it) such that a load of block ``name`` indexes with ``v // d`` or
    ``v % d`` of the iter var the inner loop binds; None when there is none."""
    extent = const_int(inner_extent)
    if extent is None:
        return None
    index = StmtIndex(sch.func)
    realize = index.realize(name)
    inner_var = index.loops_of(realize)[-1].loop_var
    bound = [iv.var for iv, value in zip(realize.block.iter_vars, realize.iter_values) if value is inner_var]
    if len(bound) != 1:
        return None
    divisors = set()
    for load in collect(realize.block.body, lambda node: isinstance(node, E.BufferLoad)):
        for position in load.indices:
            for op in collect(position, lambda node: isinstance(node, (E.FloorDiv, E.FloorMod))):
                d = const_int(op.b)
                if op.a is bound[0] and d is not None and VECTOR_LANES <= d < extent and extent % d == 0:
                    divisors.add(d)
    return max(divisors) if divisors else None


def schedule_spatial_block(sch: Schedule, name: str) -> None:
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if not loops:
        return
    extents = loop_extents(sch, loops)
    divisor = regrouping_divisor(sch, name, extents[-1])
    if divisor is not None:
        loops = loops[:-1] + list(sch.split(loops[-1], [None, divisor]))
        extents = loop_extents(sch, loops)
    chunk = vector_chunk(extents[-1])
    if chunk is None:
        outer, vector_loop = loops, None
    elif chunk == getattr(extents[-1], "value", None):
        outer, vector_loop = loops[:-1], loops[-1]
    else:
        chunk_outer, vector_loop = sch.split(loops[-1], [None, chunk])
        outer = loops[:-1] if _enough_constant_trips(extents[:-1]) else loops[:-1] + [chunk_outer]
    if outer:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        sch.parallel(fused)
    if vector_loop is not None:
        sch.vectorize(vector_loop)


def _enough_constant_trips(extents) -> bool:
    trips = 1
    for extent in extents:
        value = const_int(extent)
        if value is None:
            return False
        trips *= value
    return bool(extents) and trips >= MIN_PARALLEL_TRIPS


def schedule_elementwise(sch: Schedule) -> None:
    """Inline intermediate stages, then schedule every remaining block."""
    inline_spatial_intermediates(sch)
    for name in leaf_block_names(sch):
        schedule_spatial_block(sch, name)
