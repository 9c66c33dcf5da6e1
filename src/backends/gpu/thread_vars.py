"""One loop var per thread axis: sibling loops bound to the same ``threadIdx.*`` / ``blockIdx.*``
are the same hardware index, so they get the same Var.

TVM's schedules (dlight's norms and GEMVs) bind several sibling loops of one kernel to
``threadIdx.x``: a thread fills a "local" cache in one loop and reads it in the next. With a
Var per loop, the compaction of that cache sees two unrelated indices and cannot find a
constant size per thread; with one Var the accesses line up. Only loops of the same extent
share a Var (a Var has one range). A loop nested in another loop of
the same axis keeps its own var (the launch refuses that nesting with a clear error).

A loop bound to a virtual thread (``vthread``, ``vthread.x/y/z``: meta-schedule's tiles) is
a serial loop here: virtual threads are iterations one real thread runs in turn, which is
what the interpreter runs too.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import Mutator, substitute
from tensorir.stmt import For
from tensorir.structural import structural_equal

from .function import BLOCK_AXES, THREAD_AXES

VIRTUAL_AXES = ("vthread", "vthread.x", "vthread.y", "vthread.z")


class _Unify(Mutator):
    def __init__(self):
        super().__init__()
        self.first: dict = {}      # (tag, dtype) -> [(extent, the Var of the first loop of that extent)]
        self.active: set = set()   # tags of the enclosing bound loops

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        return node

    @handles(For)
    def visit_For(self, loop: For):
        tag = loop.thread_tag
        if loop.kind == "thread_binding" and tag in VIRTUAL_AXES:
            return self.generic_visit(For(loop.loop_var, loop.min, loop.extent, "serial", loop.body,
                                          annotations=loop.annotations))
        if loop.kind != "thread_binding" or tag not in THREAD_AXES + BLOCK_AXES or tag in self.active \
                or not E.is_const_int(loop.min, 0):
            return self.generic_visit(loop)
        # only loops of one extent share a Var: a Var is one range to every analysis (simplify_indices
        # and the compaction bind each loop's range to its var, and two ranges intersect: a second
        # threadIdx.x loop of 40 under the first one's 24 had `tx < 24` folded to true, reading past
        # a row and dropping the branch for the other 16 threads)
        key = (tag, loop.loop_var.dtype)
        seen = self.first.setdefault(key, [])
        canon = next((var for extent, var in seen if structural_equal(extent, loop.extent)), None)
        if canon is None:
            seen.append((loop.extent, loop.loop_var))
            canon = loop.loop_var
        if canon is not loop.loop_var:
            loop = substitute(loop, {loop.loop_var: canon})
        self.active.add(tag)
        try:
            return self.generic_visit(loop)
        finally:
            self.active.discard(tag)


def unify_thread_vars(func: PrimFunc) -> PrimFunc:
    body = _Unify().visit(func.body)
    return func if body is func.body else func.with_body(body)
