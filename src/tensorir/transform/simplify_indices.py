"""simplify_indices: canonicalise buffer indices, loop bounds and conditions
with ``tensorir.arith`` (linearised indices are where this pays off)."""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..expr import BufferLoad
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import BufferStore, For, IfThenElse, LetStmt


class _IndexSimplifier(Mutator):
    def __init__(self):
        super().__init__()
        from ..arith import Analyzer
        self.analyzer = Analyzer()

    def s(self, e):
        return self.analyzer.simplify(e)

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.s(i) for i in node.indices))

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.s(i) for i in node.indices))

    @handles(For)
    def visit_For(self, node: For):
        node = self.generic_visit(node)
        return node.replace(min=self.s(node.min), extent=self.s(node.extent))

    @handles(IfThenElse)
    def visit_IfThenElse(self, node: IfThenElse):
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
