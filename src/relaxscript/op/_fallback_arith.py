"""A minimal stand-in for ``tensorir.arith.Analyzer``.

Used only when ``tensorir.arith`` is not importable: it folds constants and
compares expressions structurally, so deduction still works (with less
simplification) but never claims a fact it cannot see directly.
"""
from __future__ import annotations

import operator

from tensorir import expr as E
from tensorir.structural import structural_equal

_ARITH = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul,
    E.FloorDiv: operator.floordiv, E.FloorMod: operator.mod, E.Min: min, E.Max: max,
}
_CMP = {
    E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt,
    E.LE: operator.le, E.GT: operator.gt, E.GE: operator.ge,
}


def fold(e: E.PrimExpr) -> E.PrimExpr:
    """Fold literal sub-expressions; everything else is rebuilt unchanged."""
    cls = type(e)
    if cls in _ARITH:
        a, b = fold(e.a), fold(e.b)
        if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
            if cls in (E.FloorDiv, E.FloorMod) and b.value == 0:
                return cls(a, b)
            return E.IntImm(_ARITH[cls](a.value, b.value), e.dtype)
        if cls is E.Mul and (E.is_const_int(a, 1) or E.is_const_int(b, 1)):
            return b if E.is_const_int(a, 1) else a
        if cls in (E.Add, E.Sub) and E.is_const_int(b, 0):
            return a
        if cls is E.FloorDiv and E.is_const_int(b, 1):
            return a
        return cls(a, b)
    if cls in _CMP:
        a, b = fold(e.a), fold(e.b)
        if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
            return E.IntImm(_CMP[cls](a.value, b.value), "bool")
        if structural_equal(a, b) and cls in (E.EQ, E.LE, E.GE):
            return E.IntImm(True, "bool")
        return cls(a, b)
    if cls is E.Select:
        c = fold(e.condition)
        if isinstance(c, E.IntImm):
            return fold(e.true_value if c.value else e.false_value)
        return E.Select(c, fold(e.true_value), fold(e.false_value))
    return e


class FallbackAnalyzer:
    def bind(self, var, value) -> None:  # facts are not tracked by the fallback
        pass

    def simplify(self, e):
        return fold(E.convert(e))

    def can_prove(self, cond) -> bool:
        c = fold(cond)
        return isinstance(c, E.IntImm) and bool(c.value)

    def can_prove_equal(self, a, b) -> bool:
        a, b = fold(E.convert(a)), fold(E.convert(b))
        return structural_equal(a, b)

    def can_prove_less_equal(self, a, b) -> bool:
        return self.can_prove(E.LE(a, b))

    def can_prove_divisible(self, e, k: int) -> bool:
        e = fold(E.convert(e))
        if isinstance(e, E.IntImm):
            return e.value % k == 0
        if isinstance(e, E.Mul):
            return any(isinstance(x, E.IntImm) and x.value % k == 0 for x in (e.a, e.b))
        return False

    def const_int_bound(self, e):
        e = fold(E.convert(e))
        if isinstance(e, E.IntImm):
            return (e.value, e.value)
        if isinstance(e, E.Var):
            return (e.lower, e.upper)
        return (None, None)
