"""simplify_indices: canonicalise buffer indices, loop bounds and conditions
with ``tensorir.arith`` (linearised indices are where this pays off).

Inside a loop the analyzer knows the loop variable's range, so a split index
such as ``(k1 * 16 + k2) // 32`` with ``k1 < 2, k2 < 16`` becomes 0 and
``(k1 * 16 + k2) % 16`` becomes ``k2``: the C compiler then sees a contiguous
access and a loop-invariant one (the block scale of a quantized weight)
instead of a per-lane division. ``Select`` conditions are simplified too.
"""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..expr import BufferLoad, Broadcast, IntImm, Ramp, Select, is_vector
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import AssertStmt, BufferStore, For, IfThenElse, LetStmt, Range, While


class _IndexSimplifier(Mutator):
    def __init__(self):
        super().__init__()
        from ..arith import Analyzer
        self.analyzer = Analyzer()

    def s(self, e):
        # the analyzer knows scalars: a vector index keeps its form, its scalar parts simplified
        if isinstance(e, Ramp):
            return Ramp(self.s(e.base), self.s(e.stride), e.lanes)
        if isinstance(e, Broadcast):
            return Broadcast(self.s(e.value), e.lanes)
        if is_vector(e):
            return e
        return self.analyzer.simplify(e)

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.s(i) for i in node.indices))

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.s(i) for i in node.indices))

    @handles(Select)
    def visit_Select(self, node: Select):
        node = self.generic_visit(node)
        return node.replace(condition=self.s(node.condition))

    @handles(For)
    def visit_For(self, node: For):
        lo, extent = self.s(node.min), self.s(node.extent)
        # A loop with no iteration runs no body, so the range may be assumed inside it.
        if not (isinstance(extent, IntImm) and extent.value <= 0):
            self.analyzer.bind(node.loop_var, Range(lo, extent))
        node = self.generic_visit(node)
        return node.replace(min=lo, extent=extent)

    @handles(IfThenElse, While, AssertStmt)
    def visit_IfThenElse(self, node):
        node = self.generic_visit(node)
        return node.replace(condition=self.s(node.condition))

    @handles(LetStmt)
    def visit_LetStmt(self, node: LetStmt):
        node = self.generic_visit(node)
        return node.replace(value=self.s(node.value))

    @handles(Buffer)
    def visit_Buffer(self, node: Buffer):  # buffer declarations keep their written form
        return node


def simplify_indices(func: PrimFunc) -> PrimFunc:
    return func.with_body(_IndexSimplifier().visit(func.body))
