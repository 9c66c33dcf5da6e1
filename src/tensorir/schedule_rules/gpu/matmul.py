"""The GPU tiled-matmul rule: ``C[.., i, j] += A[.., i, k] * B[.., k, j]`` with
rows (prefill, batched attention, any matmul the GEMV rule does not take).

Applies when, after spatial producers are inlined, the function has one
reduction block whose loops are ``[batch S...] S S R`` (every loop binding
an iter var), placed before every other stage, and whose operand tiles
``compute_at`` can place (affine indices).

Schedule, for 2-D block tiles of ``TILE_I x TILE_J`` outputs over
``THREADS_I x THREADS_J`` threads (each thread a ``(TILE_I/THREADS_I) x
(TILE_J/THREADS_J)`` register tile):
- loops ``batch.., i0, j0 | k0 | i1, j1 | k1, i2, j2``; batch and ``i0`` fused
  on blockIdx.y, ``j0`` on blockIdx.x, ``i1``/``j1`` on threadIdx.y/x;
- the accumulator is a "local" cache (per thread), zeroed before ``k0``
  and written back by the same thread mapping (with a stage after the
  matmul, bias or activation, inlined into that write-back when it is
  elementwise over C);
- each operand read with one index pattern has its ``k0`` slice
  (``TILE_I x TILE_K`` of A, ``TILE_K x TILE_J`` of B; the k tile is the
  largest power of two up to TILE_K dividing a constant k, 1 for a
  symbolic k) read into "shared" memory by all threads of the block
  together; the lowering puts barriers around the reads. An operand read
  with several patterns (an inlined rotary embedding reads its table at
  both operands' rows) or whose slice has no constant bound (an inlined
  reshape's ``k // 64, k % 64``) stays in global memory.
Extents the tiles do not divide (n = 1 included) are covered by the splits'
predicates and the predicated constant tiles ``compute_at`` derives.
"""
from __future__ import annotations

from ...errors import ScheduleError
from ...expr import BufferLoad
from ...functor import collect
from ...schedule import Schedule
from ...schedule.state import StmtIndex
from ...structural import structural_equal
from ..common import (attempt, const_int, inline_spatial_intermediates, is_reduction_block, leaf_block_names,
                      loop_extents, loop_kinds)
from .common import bind_spatial_nest

THREADS_I = 16
THREADS_J = 16
REGISTER_I = 2
REGISTER_J = 2
TILE_K = 16


def _k_tile(k_extent: int | None) -> int:
    """The largest of TILE_K, TILE_K / 2, ... 1 dividing ``k``: the k split must leave no
    predicate, or the accumulator's init could not be moved before the k loop (the
    predicate would mix the k loop with the spatial ones). A symbolic k takes 1."""
    tile = TILE_K
    while k_extent is None and tile > 1 or k_extent is not None and k_extent % tile:
        tile //= 2
    return tile


def _operand_buffers(sch: Schedule, name: str) -> list:
    block = StmtIndex(sch.func).realize(name).block
    written = {id(w.buffer) for w in block.writes}
    seen, operands = set(), []
    for r in block.reads:
        if id(r.buffer) not in written and id(r.buffer) not in seen:
            seen.add(id(r.buffer))
            operands.append(r.buffer)
    return operands


def _single_pattern(sch: Schedule, name: str, buffer) -> bool:
    """Every load of ``buffer`` in the block uses the same indices: one tile per k step
    (an inlined rotary embedding reads its table at the rows of both operands)."""
    block = StmtIndex(sch.func).realize(name).block
    loads = collect(block.body, lambda n: isinstance(n, BufferLoad) and n.buffer is buffer)
    return all(structural_equal(ld.indices, loads[0].indices, map_free_vars=False) for ld in loads[1:])


def _constant_tile(sch: Schedule, name: str, buffer, k0) -> bool:
    """Whether ``buffer``'s slice per k step has a constant size (shared memory is sized
    per block), tried on a copy: a reshaped operand read as ``x[k // 64, i, k % 64]``
    has a tile the region analysis cannot bound."""
    k0_var = sch._loop_var(k0)
    position = next(i for i, lp in enumerate(sch.get_loops(sch.get_block(name)))
                    if sch._loop_var(lp) is k0_var)
    trial = Schedule(sch.func)
    block = trial.get_block(name)
    fetch = trial.cache_read(block, _read_index(trial, name, buffer), "shared")
    trial_k0 = trial.get_loops(trial.get_block(name))[position]
    try:
        trial.compute_at(fetch, trial_k0)
    except ScheduleError:
        return False
    return all(const_int(e) is not None for e in loop_extents(trial, trial.get_loops(fetch)[position + 1:]))


def _read_index(sch: Schedule, name: str, buffer) -> int:
    block = StmtIndex(sch.func).realize(name).block
    return next(i for i, r in enumerate(block.reads) if r.buffer is buffer)


def _cooperative_fetch(sch: Schedule, fetch) -> None:
    """Spread a shared-memory fetch over all threads of the block: tile rows over
    threadIdx.y, columns over threadIdx.x, each axis split on its own so that the
    tile's (clipped) extent bounds every index the fetch writes."""
    loops = sch.get_loops(fetch)
    tile = [lp for lp, kind in zip(loops, loop_kinds(sch, sch._block_name(fetch), loops))
            if kind == "S"][-2:]
    if len(tile) != 2:
        raise ScheduleError("matmul rule: an operand tile is not two-dimensional")
    for loop, (threads, axis) in zip(tile, ((THREADS_I, "threadIdx.y"), (THREADS_J, "threadIdx.x"))):
        _, thread = sch.split(loop, [None, threads])
        sch.bind(thread, axis)


def schedule_matmul(sch: Schedule) -> None:
    inline_spatial_intermediates(sch)
    names = leaf_block_names(sch)
    reductions = [n for n in names if is_reduction_block(sch, n)]
    if len(reductions) != 1 or names.index(reductions[0]) != 0:
        raise ScheduleError(f"matmul rule: expected one leading reduction block, found {reductions}")
    name = reductions[0]
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    kinds = "".join(k or "-" for k in loop_kinds(sch, name, loops))
    if len(loops) < 3 or kinds != "S" * (len(loops) - 1) + "R":
        raise ScheduleError(f"matmul rule: block {name!r} loops are {kinds!r}, expected [S...]SSR")
    operands = _operand_buffers(sch, name)
    if not operands:
        raise ScheduleError(f"matmul rule: block {name!r} reads no operand")
    *batch, i, j, k = loops
    k_tile = _k_tile(const_int(loop_extents(sch, [k])[0]))
    i0, i1, i2 = sch.split(i, [None, THREADS_I, REGISTER_I])
    j0, j1, j2 = sch.split(j, [None, THREADS_J, REGISTER_J])
    k0, k1 = sch.split(k, [None, k_tile])
    sch.reorder(*batch, i0, j0, k0, i1, j1, k1, i2, j2)

    write_back = sch.cache_write(block, 0, "local")
    epilogues = names[1:]
    if len(epilogues) == 1:
        attempt(sch.reverse_compute_inline, sch.get_block(epilogues[0]))
    sch.reverse_compute_at(write_back, j0)
    for buffer in operands:
        if not _single_pattern(sch, name, buffer) or not _constant_tile(sch, name, buffer, k0):
            continue  # read from global memory where the block needs it
        fetch = sch.cache_read(block, _read_index(sch, name, buffer), "shared")
        sch.compute_at(fetch, k0)
        _cooperative_fetch(sch, fetch)

    sch.bind(sch.fuse(*batch, i0) if batch else i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    init_loops = sch.get_loops(sch.decompose_reduction(block, k0))
    sch.bind(init_loops[-4], "threadIdx.y")
    sch.bind(init_loops[-3], "threadIdx.x")
    # the write-back tile by the accumulating threads' mapping: row THREADS_I x REGISTER_I
    row, col = sch.get_loops(write_back)[-2:]
    row_t, row_r = sch.split(row, [THREADS_I, REGISTER_I])
    col_t, col_r = sch.split(col, [THREADS_J, REGISTER_J])
    sch.reorder(row_t, col_t, row_r, col_r)
    sch.bind(row_t, "threadIdx.y")
    sch.bind(col_t, "threadIdx.x")
    for epilogue in leaf_block_names(sch):
        if epilogue in epilogues:  # not inlined: its own launch
            bind_spatial_nest(sch, sch.get_loops(sch.get_block(epilogue)))
