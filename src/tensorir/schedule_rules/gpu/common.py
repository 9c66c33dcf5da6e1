"""Shared helpers of the GPU schedule rules: thread counts for symbolic or
constant extents and the one-dimensional bind of a spatial loop nest."""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule import Schedule
from ..common import const_int, loop_extents, loop_kinds

# threads per block when an extent is symbolic: a multiple of every warp/wavefront size
DEFAULT_THREADS = 256
# the fewest threads a row kernel uses for a short constant row (one warp)
MIN_THREADS = 32


def thread_count(extent) -> int:
    """Threads for a loop of ``extent``: the extent itself when it is a constant
    below DEFAULT_THREADS (no idle thread), else DEFAULT_THREADS."""
    c = const_int(extent)
    return DEFAULT_THREADS if c is None else max(1, min(DEFAULT_THREADS, c))


def row_thread_count(extents) -> int:
    """Threads of a row kernel, shared by every stage of the row (one block size
    per kernel): a power of two covering the longest constant extent, between
    MIN_THREADS and DEFAULT_THREADS; DEFAULT_THREADS when any extent is symbolic."""
    consts = [const_int(e) for e in extents]
    if not consts or any(c is None for c in consts):
        return DEFAULT_THREADS
    threads = MIN_THREADS
    while threads < min(max(consts), DEFAULT_THREADS):
        threads *= 2
    return threads


def leading_spatial(sch: Schedule, name: str, loops) -> int:
    """How many outermost loops of block ``name`` bind only spatial iter vars."""
    kinds = loop_kinds(sch, name, loops)
    return next((i for i, k in enumerate(kinds) if k != "S"), len(kinds))


def bind_spatial_nest(sch: Schedule, loops, threads: int | None = None) -> None:
    """Fuse ``loops`` (spatial, outermost first) into one loop, split it by a
    constant thread count and bind the parts to blockIdx.x / threadIdx.x. The
    split's predicate keeps extents the thread count does not divide correct."""
    if not loops:
        raise ScheduleError("GPU bind: no loop to bind")
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = loop_extents(sch, [fused])[0]
    block_loop, thread_loop = sch.split(fused, [None, threads or thread_count(extent)])
    sch.bind(block_loop, "blockIdx.x")
    sch.bind(thread_loop, "threadIdx.x")
