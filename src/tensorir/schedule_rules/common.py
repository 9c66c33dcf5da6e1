"""Shared helpers of the default CPU schedule rules: reading a Schedule's
current function (blocks, loops, extents) and applying primitives that may
legitimately not apply."""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import IntImm, PrimExpr
from ..schedule import Schedule
from ..schedule.checks import binding_loop_vars, is_param_buffer
from ..schedule.state import StmtIndex

# float32 lanes of one AVX-512 register: inner loops shorter than this are not vectorized
VECTOR_LANES = 16
# the longest inner loop a vectorized chunk covers before the loop is split
MAX_VECTOR_CHUNK = 512


def const_int(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def leaf_block_names(sch: Schedule) -> list[str]:
    """Names of the non-root blocks, in program order (those under a ``while``, whose trip count
    is data-dependent, are left as written: the schedule primitives refuse them)."""
    index = StmtIndex(sch.func)
    return [r.block.name for r in index.all_realizes()
            if (r.block.name != "root" or r.block.iter_vars) and not index.under_while(r)]


def is_reduction_block(sch: Schedule, name: str) -> bool:
    block = StmtIndex(sch.func).realize(name).block
    return any(iv.kind == "R" for iv in block.iter_vars)


def writes_param(sch: Schedule, name: str) -> bool:
    block = StmtIndex(sch.func).realize(name).block
    return any(is_param_buffer(sch.func, w.buffer) for w in block.writes)


def loop_extents(sch: Schedule, loops) -> list[PrimExpr]:
    index = StmtIndex(sch.func)
    return [index.loop(sch._loop_var(lp)).extent for lp in loops]


def loop_kinds(sch: Schedule, block_name: str, loops) -> list[str]:
    """'S', 'R' or '' (binds nothing) for each loop, read from the block's bindings."""
    realize = StmtIndex(sch.func).realize(block_name)
    spatial, reduce = binding_loop_vars(realize)
    kinds = []
    for lp in loops:
        vid = id(sch._loop_var(lp))
        kinds.append("R" if vid in reduce else "S" if vid in spatial else "")
    return kinds


def attempt(primitive, *args) -> bool:
    """Apply a primitive whose preconditions may not hold; a failed primitive
    leaves the function unchanged."""
    try:
        primitive(*args)
    except ScheduleError:
        return False
    return True


def inline_spatial_intermediates(sch: Schedule, keep_buffers=frozenset()) -> None:
    """compute_inline every spatial block that writes an intermediate buffer,
    so elementwise producers cost no memory round trip. Blocks writing a
    buffer in ``keep_buffers`` (by identity) stay materialized."""
    changed = True
    while changed:
        changed = False
        for name in leaf_block_names(sch):
            if is_reduction_block(sch, name) or writes_param(sch, name):
                continue
            block = StmtIndex(sch.func).realize(name).block
            if any(id(w.buffer) in keep_buffers for w in block.writes):
                continue
            if attempt(sch.compute_inline, sch.get_block(name)):
                changed = True
                break


def vector_chunk(extent: PrimExpr) -> int | None:
    """Inner-loop chunk to vectorize for ``extent``: None when not worth it;
    the extent itself (no split) when it is a short constant."""
    c = const_int(extent)
    if c is None:
        return 64
    if c < VECTOR_LANES:
        return None
    if c <= MAX_VECTOR_CHUNK:
        return c
    for chunk in (512, 256, 128, 64, 32, 16):
        if c % chunk == 0:
            return chunk
    return 256
