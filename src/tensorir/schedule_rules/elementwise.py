"""Rule for spatial (elementwise / broadcast / injective) loop nests.

Per output block: the innermost loop is cut into a vector chunk (a guarded
split when the extent is symbolic or not a multiple), every loop above the
chunk is fused into one parallel loop, and the chunk is vectorized. Inner
extents too short for a vector register are fused into the parallel loop.
"""
from __future__ import annotations

from ..schedule import Schedule
from .common import const_int, inline_spatial_intermediates, leaf_block_names, loop_extents, vector_chunk

# constant trips above a symbolic chunk loop that are enough to share among the threads on their own
MIN_PARALLEL_TRIPS = 16


def schedule_spatial_block(sch: Schedule, name: str) -> None:
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    if not loops:
        return
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
