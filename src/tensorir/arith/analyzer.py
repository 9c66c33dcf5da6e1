"""The Analyzer: simplification and proofs under bindings and constraints.

Facts on Vars (``lower``, ``upper`` inclusive, ``multiple_of``) are always
used. ``bind`` adds a loop range or a value for a var; ``constraint_scope``
adds a condition for the duration of a ``with`` block. Every ``can_prove*``
is sound: True means proven, False means "not proven".
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import dtype as dt
from ..expr import (EQ, GE, GT, LE, LT, NE, And, FloorMod, IntImm, Not, Or, PrimExpr, Var,
                    as_bool, convert)
from ..stmt import Range
from . import interval as iv
from . import poly as P
from .bounds import Bounds
from .canonical import AtomTable
from .rewrite import Simplifier


_NEGATED = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}


class ArithError(ValueError):
    """A misuse of the arithmetic API (wrong dtype, conflicting binding)."""


class Analyzer:
    def __init__(self):
        self._atoms = AtomTable()
        self._bounds = Bounds(self)
        self._bindings: dict[Var, PrimExpr] = {}
        self._lower_polys: dict[Var, list] = {}   # symbolic lower bounds (polys), newest last
        self._upper_polys: dict[Var, list] = {}
        self._symbolic_vars: set = set()
        self._known: list = []                    # polys known to be >= 0
        self._divisors: dict[Var, int] = {}       # var -> known divisor from constraints
        # poly key -> whether prove_nonneg proved it under the current state: hull and
        # min/max chains ask the same questions again with every new Simplifier
        self._proofs: dict = {}
        self._polys: dict[int, tuple] = {}        # id(expr) -> (expr, poly), shared by Simplifiers

    # ------------------------------------------------------------ state
    def bind(self, var: Var, value, override: bool = False) -> None:
        """Bind ``var`` to a ``Range`` (loop domain) or to an expression it equals."""
        if not isinstance(var, Var):
            raise ArithError(f"bind expects a Var, got {type(var).__name__}")
        if isinstance(value, Range):
            lo = self._poly(value.min)
            hi = P.add(P.add(lo, self._poly(value.extent)), P.const(-1))
            self._add_bounds(var, lo, hi)
        else:
            value = self.simplify(convert(value))
            if var in self._bindings and not override:
                raise ArithError(f"variable {var.name!r} is already bound; pass override=True")
            if any(v is var for v in _vars_of(value)):
                raise ArithError(f"cannot bind {var.name!r} to an expression that contains it")
            self._bindings[var] = value
        self._state_changed()

    def _state_changed(self) -> None:
        """Forget what depended on the bindings, ranges and constraints."""
        self._bounds.clear()
        self._forget_derived()

    def _forget_derived(self) -> None:
        """Drop the proofs and polynomials computed under the state before a change."""
        self._proofs.clear()
        self._polys.clear()

    def _add_bounds(self, var: Var, lo: dict | None, hi: dict | None) -> None:
        if lo is not None:
            self._lower_polys.setdefault(var, []).append(lo)
        if hi is not None:
            self._upper_polys.setdefault(var, []).append(hi)
        self._symbolic_vars.add(var)
        self._forget_derived()

    @contextmanager
    def constraint_scope(self, condition):
        """Assume ``condition`` (e.g. ``i < n`` inside ``if i < n:``) within the block."""
        saved = (
            {k: list(v) for k, v in self._lower_polys.items()},
            {k: list(v) for k, v in self._upper_polys.items()},
            set(self._symbolic_vars), list(self._known), dict(self._divisors))
        try:
            for conjunct in _conjuncts(self.simplify(as_bool(condition))):
                self._assume(conjunct)
            self._state_changed()
            yield self
        finally:
            (self._lower_polys, self._upper_polys, self._symbolic_vars, self._known,
             self._divisors) = saved
            self._state_changed()

    def _assume(self, cond: PrimExpr) -> None:
        """Record one comparison; anything else is ignored (which is sound)."""
        if not isinstance(cond, (LT, LE, GT, GE, EQ)) or not dt.is_int(cond.a.dtype):
            return
        a, b = self._poly(cond.a), self._poly(cond.b)
        if isinstance(cond, (GT, GE)):
            a, b = b, a
        diff = P.add(b, a, -1)  # b - a
        if isinstance(cond, (LT, GT)):
            facts = [P.add(diff, P.const(-1))]
        elif isinstance(cond, (LE, GE)):
            facts = [diff]
        else:
            facts = [diff, P.scale(diff, -1)]
            self._assume_divisible(cond)
        for fact in facts:
            self._known.append(fact)
            self._forget_derived()
            self._derive_var_bound(fact)

    def _assume_divisible(self, cond: EQ) -> None:
        """``v % c == 0`` makes ``c`` a divisor of ``v``."""
        for lhs, rhs in ((cond.a, cond.b), (cond.b, cond.a)):
            if isinstance(lhs, FloorMod) and isinstance(lhs.a, Var) and \
                    isinstance(lhs.b, IntImm) and isinstance(rhs, IntImm) and rhs.value == 0 \
                    and lhs.b.value > 0:
                self._divisors[lhs.a] = lhs.b.value
                self._forget_derived()

    def _derive_var_bound(self, fact: dict) -> None:
        """From ``p >= 0`` where var v occurs once as ``+-v``: a bound on v."""
        for m, c in fact.items():
            hit = P.single_atom({m: c})
            if hit is None or not isinstance(hit[0], Var) or c not in (1, -1):
                continue
            v = hit[0]
            rest = {mm: cc for mm, cc in fact.items() if mm is not m}
            if any(k is v for mm in rest for k, _ in mm):
                continue
            if c == 1:   # v + rest >= 0  ->  v >= -rest
                self._add_bounds(v, P.scale(rest, -1), None)
            else:        # rest - v >= 0  ->  v <= rest
                self._add_bounds(v, None, rest)

    # ------------------------------------------------------------ queries
    def simplify(self, expr) -> PrimExpr:
        return Simplifier(self).simplify(convert(expr))

    def _poly(self, expr) -> dict:
        expr = convert(expr)
        if not dt.is_int(expr.dtype):
            raise ArithError(f"expected an integer expression, got dtype {expr.dtype}")
        return Simplifier(self).poly(expr)

    def can_prove(self, condition, use_sympy: bool = False) -> bool:
        condition = as_bool(condition)
        if type(condition) in _NEGATED and dt.is_int(condition.a.dtype):
            # what simplify decides for an integer comparison, without rendering an undecided one
            simplifier = Simplifier(self)
            decided = simplifier._decide(type(condition), simplifier.poly(condition.a),
                                         simplifier.poly(condition.b))
            if decided is not None:
                return bool(decided)
        else:
            result = self.simplify(condition)
            if isinstance(result, IntImm):
                return bool(result.value)
        if use_sympy:
            from .sympy_bridge import prove_with_sympy
            return prove_with_sympy(condition, self)
        return False

    def can_prove_equal(self, a, b, use_sympy: bool = False) -> bool:
        a, b = convert(a), convert(b)
        if dt.is_int(a.dtype) and dt.is_int(b.dtype) and not P.add(self._poly(a), self._poly(b), -1):
            return True
        return self.can_prove(EQ(a, b), use_sympy)

    def can_prove_less_equal(self, a, b, use_sympy: bool = False) -> bool:
        return self.can_prove(LE(convert(a), convert(b)), use_sympy)

    def can_prove_divisible(self, expr, k: int, use_sympy: bool = False) -> bool:
        """Whether ``expr`` is a multiple of the positive integer ``k`` for all values."""
        if not isinstance(k, int) or k <= 0:
            raise ArithError(f"can_prove_divisible needs a positive integer divisor, got {k!r}")
        p = self._poly(expr)
        if all((c * self._bounds.divisor_of_mono(m)) % k == 0 for m, c in p.items()):
            return True
        return self.can_prove(EQ(FloorMod(convert(expr), k), 0), use_sympy)

    def const_int_bound(self, expr) -> tuple:
        """Inclusive ``(lo, hi)`` bounds of an integer expression; None where unbounded."""
        expr = convert(expr)
        if expr.dtype == "bool":
            result = self.simplify(expr)
            return (int(result.value),) * 2 if isinstance(result, IntImm) else (0, 1)
        return iv.to_api(self._bounds.of_poly(self._poly(expr)))


def simplify(expr) -> PrimExpr:
    """Simplify ``expr`` using only the facts on its Vars."""
    return Analyzer().simplify(expr)


def _conjuncts(cond: PrimExpr):
    """Conditions that each hold when ``cond`` does: the operands of ``and`` and, by De Morgan,
    the negated operands of ``not (a or b)``. A disjunction itself is one opaque condition."""
    if isinstance(cond, And):
        yield from _conjuncts(cond.a)
        yield from _conjuncts(cond.b)
    elif isinstance(cond, Not) and isinstance(cond.a, Or):
        yield from _conjuncts(_negate(cond.a.a))
        yield from _conjuncts(_negate(cond.a.b))
    elif isinstance(cond, Not) and isinstance(cond.a, Not):
        yield from _conjuncts(cond.a.a)
    else:
        yield cond


def _negate(cond: PrimExpr) -> PrimExpr:
    # Only integer comparisons flip: with a NaN operand both `x < y` and `x >= y` are false.
    if type(cond) in _NEGATED and dt.is_int(cond.a.dtype):
        return _NEGATED[type(cond)](cond.a, cond.b)
    return Not(cond)


def _vars_of(expr: PrimExpr):
    from ..functor import collect
    return collect(expr, lambda n: isinstance(n, Var))
