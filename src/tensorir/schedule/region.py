"""Region analysis: bounds of index expressions when some variables range
over loops, and the buffer regions a statement touches.

``relax`` returns inclusive symbolic bounds ``(lo, hi)`` of an expression
whose variables in ``dom`` range over their Ranges (the others stay
symbolic). It is exact for sums and constant-coefficient products and a
sound over-approximation for floordiv/floormod/min/max; anything else with
a relaxed variable raises ``RegionError``.
"""
from __future__ import annotations

from typing import Mapping

from ..buffer import Buffer
from ..expr import (Add, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr,
                    Sub, Var, max_, min_)
from ..functor import collect, substitute
from ..stmt import Allocate, BlockRealize, BufferRegion, BufferStore, For, Range, Stmt
from ..structural import structural_equal


class RegionError(Exception):
    """An access pattern the region analysis cannot bound."""


def _analyzer():
    from ..arith import Analyzer
    return Analyzer()


def simplify(expr: PrimExpr) -> PrimExpr:
    from ..arith import simplify as arith_simplify
    return arith_simplify(expr)


def _mentions(expr: PrimExpr, dom: Mapping[Var, Range]) -> bool:
    ids = {id(v) for v in dom}
    return bool(collect(expr, lambda n: isinstance(n, Var) and id(n) in ids))


def _sign(analyzer, expr: PrimExpr) -> int:
    if analyzer.can_prove(expr >= 0):
        return 1
    if analyzer.can_prove(expr <= 0):
        return -1
    return 0


def relax(expr: PrimExpr, dom: Mapping[Var, Range], analyzer=None) -> tuple[PrimExpr, PrimExpr]:
    analyzer = analyzer or _analyzer()
    lo, hi = _relax(expr, dom, analyzer)
    return analyzer.simplify(lo), analyzer.simplify(hi)


def _relax(e: PrimExpr, dom, analyzer) -> tuple[PrimExpr, PrimExpr]:
    if not _mentions(e, dom):
        return e, e
    if isinstance(e, Var):
        r = dom[e]
        return r.min, r.min + r.extent - 1
    if isinstance(e, Add):
        (a0, a1), (b0, b1) = _relax(e.a, dom, analyzer), _relax(e.b, dom, analyzer)
        return a0 + b0, a1 + b1
    if isinstance(e, Sub):
        (a0, a1), (b0, b1) = _relax(e.a, dom, analyzer), _relax(e.b, dom, analyzer)
        return a0 - b1, a1 - b0
    if isinstance(e, Mul):
        (a0, a1), (b0, b1) = _relax(e.a, dom, analyzer), _relax(e.b, dom, analyzer)
        if a0 is a1 or b0 is b1:  # one side is a point: scale by its sign
            (p, (x0, x1)) = (a0, (b0, b1)) if a0 is a1 else (b0, (a0, a1))
            sign = _sign(analyzer, p)
            if sign > 0:
                return x0 * p, x1 * p
            if sign < 0:
                return x1 * p, x0 * p
        elif _sign(analyzer, a0) > 0 and _sign(analyzer, b0) > 0:
            return a0 * b0, a1 * b1
        raise RegionError(f"cannot bound product {e!r}")
    if isinstance(e, FloorDiv) and not _mentions(e.b, dom):
        a0, a1 = _relax(e.a, dom, analyzer)
        sign = _sign(analyzer, e.b - 1)
        if sign > 0:
            return a0 // e.b, a1 // e.b
        raise RegionError(f"cannot bound division by {e.b!r}")
    if isinstance(e, FloorMod) and not _mentions(e.b, dom):
        if _sign(analyzer, e.b - 1) > 0:
            return IntImm(0, e.dtype), e.b - 1
        raise RegionError(f"cannot bound modulo by {e.b!r}")
    if isinstance(e, (Min, Max)):
        (a0, a1), (b0, b1) = _relax(e.a, dom, analyzer), _relax(e.b, dom, analyzer)
        fn = min_ if isinstance(e, Min) else max_
        return fn(a0, b0), fn(a1, b1)
    if isinstance(e, Cast) and not e.dtype.startswith("float"):
        lo, hi = _relax(e.value, dom, analyzer)
        return Cast(e.dtype, lo), Cast(e.dtype, hi)
    raise RegionError(f"cannot bound {e!r} over loop variables")


def relax_range(r: Range, dom, analyzer=None) -> tuple[PrimExpr, PrimExpr]:
    """Inclusive bounds of all points of ``r`` when ``dom`` varies."""
    analyzer = analyzer or _analyzer()
    lo, _ = relax(r.min, dom, analyzer)
    _, hi = relax(r.min + r.extent - 1, dom, analyzer)
    return lo, hi


def hull(bounds: list[tuple[PrimExpr, PrimExpr]], analyzer=None) -> tuple[PrimExpr, PrimExpr]:
    """Smallest interval containing all (lo, hi) pairs, collapsing provable comparisons."""
    analyzer = analyzer or _analyzer()
    lo, hi = bounds[0]
    for lo2, hi2 in bounds[1:]:
        lo = lo if analyzer.can_prove(lo <= lo2) else lo2 if analyzer.can_prove(lo2 <= lo) else min_(lo, lo2)
        hi = hi if analyzer.can_prove(hi >= hi2) else hi2 if analyzer.can_prove(hi2 >= hi) else max_(hi, hi2)
    return analyzer.simplify(lo), analyzer.simplify(hi)


def region_of(bounds: list[tuple[PrimExpr, PrimExpr]], analyzer=None) -> list[Range]:
    analyzer = analyzer or _analyzer()
    return [Range(lo, 1) if structural_equal(lo, hi) else Range(lo, analyzer.simplify(hi - lo + 1))
            for lo, hi in bounds]


# ----------------------------------------------------------------- access inference
class _Accesses:
    def __init__(self):
        self.order: list[Buffer] = []
        self.bounds: dict[int, list[list[tuple[PrimExpr, PrimExpr]]]] = {}

    def add(self, buffer: Buffer, dims: list[tuple[PrimExpr, PrimExpr]]):
        if id(buffer) not in self.bounds:
            self.order.append(buffer)
            self.bounds[id(buffer)] = []
        self.bounds[id(buffer)].append(dims)

    def regions(self, analyzer, skip: set[int]) -> list[BufferRegion]:
        out = []
        for buf in self.order:
            if id(buf) in skip:
                continue
            per_access = self.bounds[id(buf)]
            dims = [hull([acc[d] for acc in per_access], analyzer) for d in range(buf.ndim)]
            out.append(BufferRegion(buf, region_of(dims, analyzer)))
        return out


def infer_access_regions(body: Stmt, init: Stmt | None = None, alloc_buffers=(),
                         analyzer=None) -> tuple[list[BufferRegion], list[BufferRegion]]:
    """(reads, writes) of a block with this body/init; loops and nested blocks inside are relaxed.

    Buffers allocated inside (``alloc_buffers`` and nested blocks' allocations) are left out;
    reads of ``init`` are not reported (as in TVMScript, ``T.reads`` lists the update's reads).
    """
    analyzer = analyzer or _analyzer()
    reads, writes = _Accesses(), _Accesses()
    skip = {id(b) for b in alloc_buffers}
    _walk(body, {}, reads, writes, skip, analyzer)
    if init is not None:
        _walk(init, {}, _Accesses(), writes, skip, analyzer)
    return reads.regions(analyzer, skip), writes.regions(analyzer, skip)


def _point_bounds(indices, dom, analyzer):
    return [relax(i, dom, analyzer) for i in indices]


def _walk(node, dom, reads: _Accesses, writes: _Accesses, skip: set[int], analyzer):
    if isinstance(node, For):
        inner = dict(dom)
        inner[node.loop_var] = Range(node.min, node.extent)
        _walk(node.body, inner, reads, writes, skip, analyzer)
        return
    if isinstance(node, BlockRealize):
        block = node.block
        skip.update(id(b) for b in block.alloc_buffers)
        binding = {iv.var: v for iv, v in zip(block.iter_vars, node.iter_values)}
        for target, regions in ((reads, block.reads), (writes, block.writes)):
            for reg in regions:
                ranges = [substitute(r, binding) for r in reg.region]
                target.add(reg.buffer, [relax_range(r, dom, analyzer) for r in ranges])
        for v in node.iter_values:
            _walk_expr(v, dom, reads, analyzer)
        return
    if isinstance(node, BufferStore):
        writes.add(node.buffer, _point_bounds(node.indices, dom, analyzer))
        _walk_expr(node.value, dom, reads, analyzer)
        for i in node.indices:
            _walk_expr(i, dom, reads, analyzer)
        return
    if isinstance(node, PrimExpr):
        _walk_expr(node, dom, reads, analyzer)
        return
    if isinstance(node, Allocate):
        skip.add(id(node.buffer))
        _walk(node.body, dom, reads, writes, skip, analyzer)
        return
    from ..functor import iter_children
    for child in iter_children(node):
        _walk(child, dom, reads, writes, skip, analyzer)


def _walk_expr(expr: PrimExpr, dom, reads: _Accesses, analyzer):
    for load in collect(expr, lambda n: isinstance(n, BufferLoad)):
        reads.add(load.buffer, _point_bounds(load.indices, dom, analyzer))
