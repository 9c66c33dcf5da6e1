"""lower_predicates: turn each block's ``T.where`` predicate into an ``if``
around the block instance, leaving the block with a true predicate."""
from __future__ import annotations

from ..dispatch import handles
from ..expr import IntImm, PrimExpr
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import BlockRealize, IfThenElse, is_true


class _PredicateLowerer(Mutator):
    @handles(BlockRealize)
    def visit_BlockRealize(self, node: BlockRealize):
        node = self.generic_visit(node)
        if is_true(node.predicate):
            return node
        return IfThenElse(node.predicate, node.replace(predicate=IntImm(True, "bool")))

    @handles(PrimExpr)
    def visit_PrimExpr(self, node):  # expressions hold no blocks
        return node


def guard_with_predicate(realize: BlockRealize, stmt):
    """``stmt`` (the lowered form of ``realize``) guarded by the realize's predicate."""
    return stmt if is_true(realize.predicate) else IfThenElse(realize.predicate, stmt)


def lower_predicates(func: PrimFunc) -> PrimFunc:
    return func.with_body(_PredicateLowerer().visit(func.body))
