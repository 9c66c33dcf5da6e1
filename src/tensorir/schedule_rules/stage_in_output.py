"""Store expensive elementwise intermediates in the output they end up in.

Softmax legalizes to ``e = exp(x - max); s = sum(e); out = e / s``: ``e`` is
read by the sum and by the final elementwise stage. Inlining ``e`` (the
reduction rule's default for spatial intermediates) computes ``exp`` twice
per element; materializing it in its own full-size buffer costs an extra
tensor of memory. Once every stage runs one row at a time, ``e`` can live
in the output row itself: the final stage then rewrites it in place.

The same holds for a chain: in ``softmax(layer_norm(x) * c)`` the scaled
row is read by the max and by the exp, and the exp row by the sum and the
final division. Both live in the output row one after the other, because
each one is dead before the next is written, or is read only at the
element its successor writes (an in-place update).
"""
from __future__ import annotations

from ..buffer import Buffer
from ..expr import BufferLoad, Call, IntImm
from ..function import PrimFunc
from ..functor import collect
from ..schedule.cache import swap_buffer
from ..schedule.checks import is_param_buffer, readers_of, writers_of
from ..schedule.state import StmtIndex
from ..stmt import Block, BlockRealize, BufferStore
from ..structural import structural_equal


def _is_spatial(block: Block) -> bool:
    return bool(block.iter_vars) and all(iv.kind == "S" for iv in block.iter_vars)


def _store_at_iter_vars(block: Block) -> BufferStore | None:
    """The block's single store when it writes exactly the element its iter vars name."""
    if not isinstance(block.body, BufferStore) or block.init is not None:
        return None
    store = block.body
    point = [iv.var for iv in block.iter_vars]
    if len(store.indices) != len(point) or any(i is not v for i, v in zip(store.indices, point)):
        return None
    return store


def _covers_buffer(block: Block, buffer: Buffer) -> bool:
    """Each iter var runs from 0 over the matching dimension of ``buffer``."""
    return all(isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0 for iv in block.iter_vars) \
        and all(structural_equal(iv.dom.extent, dim) for iv, dim in zip(block.iter_vars, buffer.shape))


def _has_call(expr) -> bool:
    return bool(collect(expr, lambda n: isinstance(n, Call)))


def _row_local_reads(block: Block, buffer: Buffer) -> bool:
    """Every load of ``buffer`` names the block's own row: all but the last index are the
    block's leading iter vars, so sharing one row's storage across stages is safe."""
    lead = [iv.var for iv in block.iter_vars[:buffer.ndim - 1]]
    loads = collect(block.body, lambda n: isinstance(n, BufferLoad) and n.buffer is buffer)
    return all(len(ld.indices) == buffer.ndim and all(i is v for i, v in zip(ld.indices[:-1], lead))
               and all(iv.kind == "S" for iv in block.iter_vars[:buffer.ndim - 1]) for ld in loads)


def _reads_only_own_element(block: Block, buffer: Buffer) -> bool:
    point = [iv.var for iv in block.iter_vars]
    loads = collect(block.body, lambda n: isinstance(n, BufferLoad) and n.buffer is buffer)
    return bool(loads) and all(len(ld.indices) == len(point) and
                               all(i is v for i, v in zip(ld.indices, point)) for ld in loads)


def _worth_storing(func: PrimFunc, value) -> bool:
    """Recomputing ``value`` costs more than a store and a load: it calls a math function
    or reads another intermediate (which inlining would recompute in turn)."""
    return _has_call(value) or bool(collect(
        value, lambda n: isinstance(n, BufferLoad) and not is_param_buffer(func, n.buffer)))


def _stageable(func: PrimFunc, realizes: list[BlockRealize], pos: int, out: Buffer) -> Buffer | None:
    """The intermediate written by ``realizes[pos]`` when it may share the output's storage."""
    block = realizes[pos].block
    store = _store_at_iter_vars(block)
    if store is None or not _is_spatial(block) or is_param_buffer(func, store.buffer):
        return None
    mid = store.buffer
    if (mid.dtype != out.dtype or len(mid.shape) != len(out.shape)
            or not all(structural_equal(a, b) for a, b in zip(mid.shape, out.shape))):
        return None
    readers = readers_of(realizes, mid)
    if (len(readers) < 2 or len(writers_of(realizes, mid)) != 1 or not _covers_buffer(block, mid)
            or not _worth_storing(func, store.value) or any(realizes.index(r) < pos for r in readers)
            or not all(_row_local_reads(r.block, mid) for r in readers)):
        return None
    return mid


def _dead_by(realizes: list[BlockRealize], mid: Buffer, pos: int) -> bool:
    """``mid`` may be overwritten by the block at ``pos``: no later block reads it, and
    that block reads it (if at all) only at the element it writes."""
    last_read = max(realizes.index(r) for r in readers_of(realizes, mid))
    if last_read < pos:
        return True
    return last_read == pos and _reads_only_own_element(realizes[pos].block, mid)


def _candidate(func: PrimFunc, realizes: list[BlockRealize]) -> tuple[list[Buffer], Buffer] | None:
    """(intermediates, output) to merge, or None when the pattern does not hold."""
    if len(realizes) < 3:
        return None
    last = realizes[-1].block
    final_store = _store_at_iter_vars(last)
    if final_store is None or not _is_spatial(last) or not is_param_buffer(func, final_store.buffer):
        return None
    out = final_store.buffer
    if len(writers_of(realizes, out)) != 1 or readers_of(realizes, out):
        return None
    candidates = [(pos, mid) for pos in range(len(realizes) - 1)
                  for mid in [_stageable(func, realizes, pos, out)] if mid is not None]
    excluded: set[int] = set()
    while True:
        staged = _chain(realizes, [(pos, mid) for pos, mid in candidates if id(mid) not in excluded])
        # a spatial reader that is not staged gets inlined into its own readers, which would then
        # read the staged row at elements the stage order no longer protects: leave such rows out
        ids = {id(mid) for mid in staged} | {id(out)}
        bad = {id(mid) for mid in staged for r in readers_of(realizes, mid)
               if _is_spatial(r.block) and not any(id(w.buffer) in ids for w in r.block.writes)}
        if not bad:
            return (staged, out) if staged else None
        excluded |= bad


def _chain(realizes: list[BlockRealize], candidates: list) -> list[Buffer]:
    """Of the (position, intermediate) ``candidates``, those that may live in the output one
    after the other, in order."""
    staged: list[Buffer] = []
    for pos, mid in candidates:
        if not staged or _dead_by(realizes, staged[-1], pos):
            staged.append(mid)
    while staged and not _dead_by(realizes, staged[-1], len(realizes) - 1):
        staged.pop()
    return staged


def find_output_stageable(func: PrimFunc) -> tuple[list[Buffer], Buffer] | None:
    """(intermediates, output) of an unscheduled ``func`` whose intermediates may be stored in
    the output once every stage runs one row at a time (see module doc), else None."""
    root = func.root_block
    if root is None:
        return None
    return _candidate(func, [r for r in StmtIndex(func).all_realizes() if r.block is not root])


def store_in_output(func: PrimFunc, mids: list[Buffer], out: Buffer) -> PrimFunc:
    """``func`` with each intermediate of ``mids`` replaced by ``out`` and its allocation dropped."""
    root = func.root_block
    mids = [m for m in mids if any(b is m for b in root.alloc_buffers)]
    if not mids:
        return func
    new_root = root.replace(alloc_buffers=tuple(b for b in root.alloc_buffers if all(b is not m for m in mids)))
    body = func.body.replace(block=new_root)
    for mid in mids:
        body = swap_buffer(body, mid, out)
    return func.with_body(body)
