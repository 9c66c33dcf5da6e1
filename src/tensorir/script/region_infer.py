"""Infer a block's read and write regions from its body (when T.reads/T.writes are absent).

Regions are sound over-approximations: each dimension is a single point when
every access uses the same index, a constant-offset window around a common
base, the range of a loop nested inside the block, or else the whole
dimension. They never cover less than what is accessed.
"""
from __future__ import annotations

from typing import Iterable

from .. import expr as E
from ..buffer import Buffer
from ..functor import collect, substitute
from ..stmt import (Allocate, BlockRealize, BufferRegion, BufferStore, For, LetStmt,
                    MatchBufferRegion, Range)
from ..structural import structural_equal


def _same(a, b) -> bool:
    return structural_equal(a, b, map_free_vars=False)


def _vars(node) -> set:
    return {id(v) for v in collect(node, lambda n: isinstance(n, E.Var))}


class _AccessCollector:
    """Walks a block body recording, per buffer, the accessed ranges per dimension."""

    def __init__(self, excluded: Iterable[Buffer], match_buffers: Iterable[MatchBufferRegion]):
        self.excluded = {id(b) for b in excluded}
        self.match = {id(m.buffer): m.source for m in match_buffers}
        self.inner_ranges: dict[int, Range | None] = {}  # vars bound inside the block
        self.reads: dict[int, tuple[Buffer, list[list[Range]]]] = {}
        self.writes: dict[int, tuple[Buffer, list[list[Range]]]] = {}

    # ---------------------------------------------------------------- walking
    def stmt(self, node) -> None:
        if node is None:
            return
        if isinstance(node, BufferStore):
            self.expr(node.value)
            for i in node.indices:
                self.expr(i)
            self.access(self.writes, node.buffer, [self.index_range(i) for i in node.indices])
        elif isinstance(node, For):
            self.expr(node.min)
            self.expr(node.extent)
            self.inner_ranges[id(node.loop_var)] = Range(node.min, node.extent)
            self.stmt(node.body)
        elif isinstance(node, LetStmt):
            self.expr(node.value)
            self.inner_ranges[id(node.var)] = None
            self.stmt(node.body)
        elif isinstance(node, Allocate):
            self.excluded.add(id(node.buffer))
            self.stmt(node.body)
        elif isinstance(node, BlockRealize):
            self.nested_block(node)
        else:
            for field in node._fields:
                value = getattr(node, field)
                for child in value if isinstance(value, tuple) else (value,):
                    if isinstance(child, E.PrimExpr):
                        self.expr(child)
                    elif child is not None and not isinstance(child, Buffer):
                        self.stmt(child)

    def expr(self, node: E.PrimExpr) -> None:
        for load in collect(node, lambda n: isinstance(n, E.BufferLoad)):
            self.access(self.reads, load.buffer, [self.index_range(i) for i in load.indices])

    def nested_block(self, realize: BlockRealize) -> None:
        for v in realize.iter_values:
            self.expr(v)
        self.expr(realize.predicate)
        block = realize.block
        binding = dict(zip((iv.var for iv in block.iter_vars), realize.iter_values))
        for target, regions in ((self.reads, block.reads), (self.writes, block.writes)):
            for region in regions:
                ranges = []
                for r in region.region:
                    lo, ext = substitute(r.min, binding), substitute(r.extent, binding)
                    ranges.append(self.relax_range(lo, ext))
                self.access(target, region.buffer, ranges)

    # ---------------------------------------------------------------- regions
    def is_outer(self, expr: E.PrimExpr) -> bool:
        return not (_vars(expr) & self.inner_ranges.keys()) and \
            not collect(expr, lambda n: isinstance(n, E.BufferLoad))

    def relax_range(self, lo, ext) -> Range | None:
        """The range as seen from outside the block, or None (= whole dimension)."""
        if self.is_outer(lo) and self.is_outer(ext):
            return Range(lo, ext)
        if E.is_const_int(ext, 1):
            return self.index_range(lo)
        return None

    def index_range(self, index: E.PrimExpr) -> Range | None:
        if E.is_vector(index):
            return self.lanes_range(index)
        if self.is_outer(index):
            return Range(index, E.const(1, index.dtype))
        base, var = None, index
        if isinstance(index, E.Add):
            if isinstance(index.b, E.Var) and self.is_outer(index.a):
                base, var = index.a, index.b
            elif isinstance(index.a, E.Var) and self.is_outer(index.b):
                base, var = index.b, index.a
        loop = self.inner_ranges.get(id(var)) if isinstance(var, E.Var) else None
        if loop is None or not (self.is_outer(loop.min) and self.is_outer(loop.extent)):
            return None
        lo = loop.min if base is None else (base if E.is_const_int(loop.min, 0) else base + loop.min)
        return Range(lo, loop.extent)

    def lanes_range(self, index: E.PrimExpr) -> Range | None:
        """The elements a vector index reaches: a broadcast's one, a ramp's span (a constant
        stride); None (the whole dimension) for any other vector."""
        if isinstance(index, E.Broadcast):
            return self.index_range(index.value)
        if not (isinstance(index, E.Ramp) and E.is_const_int(index.stride) and self.is_outer(index.base)):
            return None
        span = index.stride.value * (index.lanes - 1)
        lo = index.base if span >= 0 else index.base + span
        return Range(lo, E.const(abs(span) + 1, index.base.dtype))

    def access(self, table, buffer: Buffer, ranges: list[Range | None]) -> None:
        if id(buffer) in self.excluded:
            return
        source = self.match.get(id(buffer))
        if source is not None:  # a view: the block touches its source region
            buffer, ranges = source.buffer, list(source.region)
            if id(buffer) in self.excluded:  # a view of the block's own allocation
                return
        entry = table.setdefault(id(buffer), (buffer, [[] for _ in buffer.shape]))
        for dim, r in enumerate(ranges):
            entry[1][dim].append(r)


def _split_offset(e: E.PrimExpr):
    """``base + c`` -> (base, c); a constant -> (None, c); else (e, 0)."""
    if E.is_const_int(e):
        return None, e.value
    if isinstance(e, E.Add) and E.is_const_int(e.b):
        return e.a, e.b.value
    if isinstance(e, E.Sub) and E.is_const_int(e.b):
        return e.a, -e.b.value
    return e, 0


def _union(buffer: Buffer, dim: int, ranges: list[Range | None]) -> Range:
    full = Range(E.const(0, buffer.shape[dim].dtype), buffer.shape[dim])
    if any(r is None for r in ranges):
        return full
    first = ranges[0]
    if all(_same(r.min, first.min) and _same(r.extent, first.extent) for r in ranges[1:]):
        return first
    if not all(E.is_const_int(r.extent) for r in ranges):
        return full
    parts = [(_split_offset(r.min), r.extent.value) for r in ranges]
    base = parts[0][0][0]
    if not all((b is None and base is None) or (b is not None and base is not None and _same(b, base))
               for (b, _), _ in parts):
        return full
    lo = min(c for (_, c), _ in parts)
    hi = max(c + ext for (_, c), ext in parts)
    dtype = first.min.dtype
    start = E.const(lo, dtype) if base is None else (base if lo == 0 else E.add(base, E.const(lo, dtype)))
    return Range(start, E.const(hi - lo, dtype))


def infer_regions(body, init, alloc_buffers=(), match_buffers=()):
    """(reads, writes) of a block with this body/init, as BufferRegion lists."""
    collector = _AccessCollector(alloc_buffers, match_buffers)
    collector.stmt(init)
    collector.stmt(body)

    def build(table):
        return [BufferRegion(buf, [_union(buf, d, rs) for d, rs in enumerate(dims)])
                for buf, dims in table.values()]
    return build(collector.reads), build(collector.writes)


__all__ = ["infer_regions"]
