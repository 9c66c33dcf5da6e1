"""How many times a kernel's innermost loop bodies run, as expressions of its symbolic vars.

A kernel that allocates nothing can still iterate over a symbolic domain whose point count
passes int64 (``R.sum(R.ones((a, b)))`` fused into one kernel at a = b = 2**32): generated code
counts with int64 indices, so such a nest wraps or never ends. Callers evaluate these counts
with the run-time values before the kernel runs (vm/codegen.py) and refuse a count past int64.
"""
from __future__ import annotations

from ..expr import IntImm, PrimExpr, Var, max_
from .. import dtype as dt
from ..functor import children, collect
from ..stmt import Allocate, Block, For, Stmt


def loop_nest_counts(body: Stmt, symbols) -> list[tuple[PrimExpr, str]]:
    """``(count, what)`` per innermost loop: the product of the extents of the loops around it (an
    extent below zero counts as zero), "iterations"; and per buffer allocated inside, its size,
    "bytes of buffer 'name'". Only
    factors over ``symbols`` (and constants) are kept: an extent that reads an outer loop var or a
    let-bound value is left out, so a count is never more than the true one."""
    known = set(symbols)
    counts: dict = {}

    def factor(extent: PrimExpr):
        used = [extent] if isinstance(extent, Var) else collect(extent, lambda n: isinstance(n, Var))
        return max_(extent, IntImm(0, extent.dtype)) if all(v in known for v in used) else None

    def add(factors: list, what: str) -> None:
        if factors:
            total = factors[0]
            for f in factors[1:]:
                total = total * f
            counts.setdefault(str(total), (total, what))

    def walk(node, product: list) -> bool:
        """Walks ``node`` inside loops of extents ``product``; True when it holds a loop."""
        if isinstance(node, For):
            f = factor(node.extent)
            inner = product + [f] if f is not None else product
            if not walk(node.body, inner):
                add(inner, "iterations")
            return True
        buffers = node.alloc_buffers if isinstance(node, Block) else \
            (node.buffer,) if isinstance(node, Allocate) else ()
        for buf in buffers:
            dims = [factor(d) for d in buf.shape]
            if all(d is not None for d in dims):
                add(dims + [IntImm(dt.itemsize(buf.dtype))], f"bytes of buffer '{buf.name}'")
        found = False
        for child in children(node):
            if isinstance(child, Stmt):
                found = walk(child, product) or found
        return found

    walk(body, [])
    return list(counts.values())


__all__ = ["loop_nest_counts"]
