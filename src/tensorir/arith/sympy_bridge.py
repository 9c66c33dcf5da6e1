"""Conversion to and from sympy: the slow fallback prover and test oracle.

``floordiv(a, b)`` maps to ``floor(a / b)`` and ``floormod`` to ``Mod``.
sympy is imported on first use so the fast path never pays for it.
"""
from __future__ import annotations

from .. import dtype as dt
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Call, Cast, Div, FloatImm,
                    FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or, PrimExpr, Select, Sub, Var,
                    const, floordiv, floormod, max_, min_)


class SympyConversionError(ValueError):
    """An expression has no counterpart on the other side of the bridge."""


def to_sympy(expr: PrimExpr, var_table: dict | None = None):
    """The sympy form of ``expr``; ``var_table`` (Var -> Symbol) is filled and reused.

    Integer Vars become integer Symbols, non-negative when the Var's ``lower`` >= 0.
    """
    import sympy
    table = {} if var_table is None else var_table
    return _ToSympy(sympy, table).convert(expr)


class _ToSympy:
    def __init__(self, sympy, table: dict):
        self.sp = sympy
        self.table = table

    def symbol(self, v: Var):
        sym = self.table.get(v)
        if sym is None:
            used = {str(s) for s in self.table.values()}
            name, i = v.name, 0
            while name in used:
                i += 1
                name = f"{v.name}_{i}"
            nonneg = v.lower is not None and v.lower >= 0
            sym = self.sp.Symbol(name, integer=dt.is_int(v.dtype) or None,
                                 real=True, nonnegative=nonneg or None)
            self.table[v] = sym
        return sym

    def floormod(self, a, b):
        """``Mod(a, b)``, except around a nested ``Mod``: sympy 1.14 rewrites
        ``Mod(2*Mod(k, 3), 3)`` to ``2*Mod(k, 3)`` (wrong for k = 2), so that form is
        spelled ``a - b*floor(a/b)``, which it keeps exact."""
        sp = self.sp
        if isinstance(a, sp.Basic) and a.has(sp.Mod):
            return a - b * sp.floor(a / b)
        return sp.Mod(a, b)

    def per_branch(self, fn, a, b):
        """``fn(a, b)`` (a floor division or modulo) taken in each branch of a Piecewise operand:
        sympy 1.14 infers ``Piecewise((0, c), (2, True)) / 6`` to be an integer, so it folded
        ``floor`` of it to the bare quotient and ``Mod(.., 6)`` to 0 (wrong where the value is 2);
        within a branch the operand is a plain expression. A Piecewise inside a sum or product is
        lifted to the top first (``piecewise_fold``)."""
        sp = self.sp
        a, b = (sp.piecewise_fold(x) if isinstance(x, sp.Basic) and x.has(sp.Piecewise) else x for x in (a, b))
        if isinstance(a, sp.Piecewise):
            return sp.Piecewise(*[(self.per_branch(fn, value, b), cond) for value, cond in a.args])
        if isinstance(b, sp.Piecewise):
            return sp.Piecewise(*[(self.per_branch(fn, a, value), cond) for value, cond in b.args])
        return fn(a, b)

    def convert(self, e):
        sp = self.sp
        c = self.convert
        if isinstance(e, IntImm):
            return sp.true if e.value is True else sp.false if e.value is False else sp.Integer(e.value)
        if isinstance(e, FloatImm):
            return sp.Float(e.value)
        if isinstance(e, Var):
            return self.symbol(e)
        simple = {Add: lambda a, b: a + b, Sub: lambda a, b: a - b, Mul: lambda a, b: a * b,
                  FloorDiv: lambda a, b: self.per_branch(lambda x, y: sp.floor(x / y), a, b),
                  FloorMod: lambda a, b: self.per_branch(self.floormod, a, b), Min: sp.Min,
                  Max: sp.Max, LT: sp.Lt, LE: sp.Le, GT: sp.Gt, GE: sp.Ge, EQ: sp.Eq, NE: sp.Ne,
                  And: sp.And, Or: sp.Or}
        fn = simple.get(type(e))
        if fn is not None:
            return fn(c(e.a), c(e.b))
        if isinstance(e, Div):
            a, b = c(e.a), c(e.b)
            if dt.is_float(e.dtype):
                return a / b
            # C division truncates toward zero.
            return sp.Piecewise((sp.floor(a / b), a * b >= 0), (-sp.floor(-a / b), True))
        if isinstance(e, Not):
            return sp.Not(c(e.a))
        if isinstance(e, Select):
            return sp.Piecewise((c(e.true_value), c(e.condition)), (c(e.false_value), True))
        if isinstance(e, Cast):
            return c(e.value)
        if isinstance(e, Call):
            return sp.Function(e.op)(*(c(a) for a in e.args))
        if isinstance(e, BufferLoad):
            return sp.Function(e.buffer.name)(*(c(i) for i in e.indices))
        raise SympyConversionError(f"no sympy form for a {type(e).__name__} node")


def from_sympy(sym, var_table: dict, dtype: str = "int64") -> PrimExpr:
    """A PrimExpr for sympy expression ``sym``; ``var_table`` maps Symbols (or their names) to Vars."""
    import sympy
    return _FromSympy(sympy, var_table, dtype).convert(sympy.sympify(sym))


class _FromSympy:
    def __init__(self, sympy, table: dict, dtype: str):
        self.sp, self.table, self.dtype = sympy, table, dtype

    def convert(self, s) -> PrimExpr:
        sp, c = self.sp, self.convert
        if s is sp.true or s is sp.false:
            return IntImm(bool(s), "bool")
        if isinstance(s, sp.Integer):
            return const(int(s), self.dtype)
        if isinstance(s, sp.Float):
            return FloatImm(float(s), "float64")
        if isinstance(s, sp.Symbol):
            v = self.table.get(s, self.table.get(str(s)))
            if v is None:
                raise SympyConversionError(f"symbol {s} is not in the variable table")
            return v
        if isinstance(s, sp.Add):
            return _reduce(lambda a, b: a + b, [c(x) for x in _ordered(sp, s.args)])
        if isinstance(s, sp.Mul):
            num, den = sp.fraction(s)
            if den != 1:
                raise SympyConversionError(f"non-integer value {s}")
            return _reduce(lambda a, b: a * b, [c(x) for x in _ordered(sp, s.args)])
        if isinstance(s, sp.Pow) and s.exp.is_Integer and s.exp > 0:
            base = c(s.base)
            return _reduce(lambda a, b: a * b, [base] * int(s.exp))
        if isinstance(s, (sp.floor, sp.ceiling)):
            num, den = sp.fraction(sp.together(s.args[0]))
            if isinstance(s, sp.floor):
                return floordiv(c(num), c(den))
            return 0 - floordiv(c(-num), c(den))
        if isinstance(s, sp.Mod):
            return floormod(c(s.args[0]), c(s.args[1]))
        if isinstance(s, (sp.Min, sp.Max)):
            fn = min_ if isinstance(s, sp.Min) else max_
            return _reduce(fn, [c(x) for x in _ordered(sp, s.args)])
        if isinstance(s, sp.Piecewise):
            (value, cond), rest = s.args[0], s.args[1:]
            if cond is sp.true or not rest:
                return c(value)
            return Select(c(cond), c(value), c(sp.Piecewise(*rest)))
        relations = {sp.StrictLessThan: LT, sp.LessThan: LE, sp.StrictGreaterThan: GT,
                     sp.GreaterThan: GE, sp.Equality: EQ, sp.Unequality: NE}
        for cls, node in relations.items():
            if isinstance(s, cls):
                return node(c(s.lhs), c(s.rhs))
        if isinstance(s, (sp.And, sp.Or)):
            node = And if isinstance(s, sp.And) else Or
            return _reduce(node, [c(x) for x in s.args])
        if isinstance(s, sp.Not):
            return Not(c(s.args[0]))
        if isinstance(s, sp.ITE):  # boolean if-then-else, from simplifying a Piecewise of booleans
            return Select(c(s.args[0]), c(s.args[1]), c(s.args[2]))
        raise SympyConversionError(f"cannot convert sympy expression {s} ({type(s).__name__})")


def _ordered(sp, args):
    return sorted(args, key=sp.default_sort_key)


def _reduce(fn, items):
    out = items[0]
    for x in items[1:]:
        out = fn(out, x)
    return out


def prove_with_sympy(condition: PrimExpr, analyzer=None) -> bool:
    """Slow path: try to prove an integer condition with sympy (sound; False = unknown).

    Each Var with a known ``lower`` is rewritten as ``lower + v'`` with ``v'``
    a non-negative integer symbol, so the lower-bound facts reach sympy.
    """
    import sympy as sp
    # The unsimplified form first: sympy likes factored forms such as (n - 1) * (n - 1).
    candidates = [condition]
    if analyzer is not None:
        candidates.append(analyzer.simplify(condition))  # applies the analyzer's bindings
    for cond in candidates:
        if isinstance(cond, IntImm):
            return bool(cond.value)
        try:
            if _prove(sp, cond):
                return True
        except (SympyConversionError, TypeError, RecursionError):
            continue
    return False


def _prove(sp, cond) -> bool:
    if isinstance(cond, And):
        return _prove(sp, cond.a) and _prove(sp, cond.b)
    if isinstance(cond, Or):
        return _prove(sp, cond.a) or _prove(sp, cond.b)
    if not isinstance(cond, (LT, LE, GT, GE, EQ, NE)) or not dt.is_int(cond.a.dtype):
        return False
    table: dict = {}
    diff = _shifted(sp, to_sympy(cond.b - cond.a, table), table)  # b - a
    if isinstance(cond, (GT, GE)):
        diff = -diff
    if isinstance(cond, (LT, GT)):
        return sp.simplify(diff - 1).is_nonnegative is True
    if isinstance(cond, (LE, GE)):
        return sp.simplify(diff).is_nonnegative is True
    diff = sp.simplify(diff)
    if isinstance(cond, EQ):
        return diff == 0
    return diff.is_positive is True or diff.is_negative is True


def _shifted(sp, expr, table: dict):
    subs = {}
    for v, sym in table.items():
        if v.lower is not None and dt.is_int(v.dtype):
            subs[sym] = v.lower + sp.Symbol(f"{sym}__above_lower", integer=True, nonnegative=True)
    return expr.subs(subs) if subs else expr
