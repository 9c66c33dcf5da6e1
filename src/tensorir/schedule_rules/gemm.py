"""Rule for matmul-like blocks ``C[.., i, j] += A[.., i, k] * B[.., k, j]``
(the pattern analysis' OutputWiseFusible kind), for the shapes the BLAS
library does not take (skinny, batched, fused epilogues, float64).

Register/cache tiling: ``i`` by ``TILE_I`` (unrolled), ``j`` by ``TILE_J``
(vectorized; a guarded split when ``n`` is symbolic), ``k`` by ``TILE_K``
outside the register tile, so one task reuses a ``TILE_K x TILE_J`` panel
of B from L2. Batch and tile loops are fused into one parallel loop; the
init is hoisted before the k loops. Elementwise epilogue blocks are moved
under the tile (``reverse_compute_at``) so they read C while it is hot.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from .common import (attempt, const_int, inline_spatial_intermediates, is_reduction_block,
                     leaf_block_names, loop_extents, loop_kinds, vector_chunk)

TILE_I = 4
TILE_J = 64
TILE_K = 256


def _tile(extent, preferred: int) -> int:
    """``preferred`` unless the extent is a smaller constant."""
    c = const_int(extent)
    return preferred if c is None else max(1, min(preferred, c))


def _operand_buffers(sch: Schedule) -> frozenset:
    """Buffers the matmul block reads, other than its own accumulator."""
    index = StmtIndex(sch.func)
    ids = set()
    for name in leaf_block_names(sch):
        if is_reduction_block(sch, name):
            block = index.realize(name).block
            written = {id(w.buffer) for w in block.writes}
            ids.update(id(r.buffer) for r in block.reads if id(r.buffer) not in written)
    return frozenset(ids)


def schedule_gemm(sch: Schedule) -> None:
    # Producers of the operands (e.g. a fused transpose) stay materialized: inlining
    # them would turn the vectorized inner loop into a strided gather on every
    # multiply-add, while materializing costs one O(n*d) copy.
    inline_spatial_intermediates(sch, keep_buffers=_operand_buffers(sch))
    names = leaf_block_names(sch)
    reductions = [n for n in names if is_reduction_block(sch, n)]
    if len(reductions) != 1:
        raise ScheduleError(f"gemm rule: expected one reduction block, found {reductions}")
    name = reductions[0]
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = "".join(loop_kinds(sch, name, loops))
    if not kinds.endswith("SSR") or kinds.count("R") != 1 or "" in loop_kinds(sch, name, loops):
        raise ScheduleError(f"gemm rule: block {name!r} loops are {kinds!r}, expected [S...]SSR")
    *batch, i, j, k = loops
    extent_i, extent_j, extent_k = loop_extents(sch, [i, j, k])
    i_outer, i_inner = sch.split(i, [None, _tile(extent_i, TILE_I)])
    j_outer, j_inner = sch.split(j, [None, _tile(extent_j, TILE_J)])
    k_tile = _tile(extent_k, TILE_K)
    if const_int(extent_k) is not None and const_int(extent_k) > k_tile and const_int(extent_k) % k_tile == 0:
        k_outer, k_inner = sch.split(k, [None, k_tile])
    else:
        k_outer, k_inner = k, None
    order = [i_outer, j_outer, k_outer] + ([k_inner] if k_inner is not None else []) + [i_inner, j_inner]
    sch.reorder(*order)
    for epilogue in names[names.index(name) + 1:]:
        attempt(sch.reverse_compute_at, sch.get_block(epilogue), j_outer)
    attempt(sch.decompose_reduction, block, k_outer)
    if vector_chunk(loop_extents(sch, [j_inner])[0]) is not None:
        sch.vectorize(j_inner)
    attempt(sch.unroll, i_inner)
    fused = sch.fuse(*batch, i_outer, j_outer) if batch else sch.fuse(i_outer, j_outer)
    sch.parallel(fused)
    for producer in names[: names.index(name)]:  # materialized operand copies
        attempt(sch.parallel, sch.get_loops(sch.get_block(producer))[0])
    for epilogue in names[names.index(name) + 1:]:
        loops = sch.get_loops(sch.get_block(epilogue))
        if len(loops) > 1 and vector_chunk(loop_extents(sch, loops[-1:])[0]) is not None:
            attempt(sch.vectorize, loops[-1])
