"""The simplifier: integer expressions through the canonical polynomial form,
boolean expressions by deciding comparisons, everything else by recursing
into children and folding constants.

One Simplifier serves one ``simplify`` call; it memoises per node so shared
subtrees are visited once and the walk stays linear in expression size. The
polynomials of integer nodes are memoised in the analyzer (until its state
changes), so a min/max chain that grows one term per query is not rebuilt.
"""
from __future__ import annotations

from math import gcd

from .. import dtype as dt
from ..buffer import Buffer
from ..dispatch import ClassDispatch, handles
from ..expr import (EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, BufferLoad, Call, Cast, CmpOp, Div,
                    FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or, PrimExpr, Select, Sub,
                    StringImm, Var, const)
from . import divmod_rules
from . import poly as P
from .evaluate import evaluate
from .prover import prove_nonneg

# Products of sums expand only up to this many terms; larger ones stay an atom.
_MAX_EXPANDED_TERMS = 64
_NEGATED = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}


def _is_int(e: PrimExpr) -> bool:
    return dt.is_int(e.dtype)


class Simplifier(ClassDispatch):
    def __init__(self, analyzer):
        self.analyzer = analyzer
        self.atoms = analyzer._atoms
        self.bounds = analyzer._bounds
        self._polys: dict[int, tuple] = analyzer._polys   # id(expr) -> (expr, poly), per analyzer state
        self._exprs: dict[int, tuple] = {}   # id(expr) -> (expr, simplified)
        self._keys: dict[int, tuple] = {}    # id(expr) -> (expr, structural key)

    def prove_nonneg(self, p: dict) -> bool:
        return prove_nonneg(self.analyzer, p)

    # ------------------------------------------------------------ entry points
    def simplify(self, e: PrimExpr) -> PrimExpr:
        hit = self._exprs.get(id(e))
        if hit is not None:
            return hit[1]
        if _is_int(e):
            out = self.render(self.poly(e), e.dtype)
        elif e.dtype == "bool":
            out = self._boolean(e)
        else:
            out = self._other(e)
        self._exprs[id(e)] = (e, out)
        return out

    def render(self, p: dict, dtype: str) -> PrimExpr:
        out = self.atoms.render(p, dtype)
        self._keys[id(out)] = (out, ("P", dtype, P.key(p)))
        return out

    def poly(self, e: PrimExpr) -> dict:
        hit = self._polys.get(id(e))
        if hit is not None:
            return hit[1]
        handler = self.handler_for(type(e))
        out = handler(self, e) if handler is not None else self._opaque(self._rebuild(e))
        self._polys[id(e)] = (e, out)
        return out

    # ------------------------------------------------------------ integer forms
    @handles(IntImm)
    def _poly_of_int_imm(self, e):
        return P.const(int(e.value))

    @handles(Var)
    def _poly_of_var(self, e):
        bound = self.analyzer._bindings.get(e)
        if bound is not None:
            return self.poly(bound)
        return P.atom(self.atoms.var(e))

    @handles(Add)
    def _poly_of_add(self, e):
        return divmod_rules.fold_div_mod_pairs(self, P.add(self.poly(e.a), self.poly(e.b)))

    @handles(Sub)
    def _poly_of_sub(self, e):
        return divmod_rules.fold_div_mod_pairs(self, P.add(self.poly(e.a), self.poly(e.b), -1))

    @handles(Mul)
    def _poly_of_mul(self, e):
        a, b = self.poly(e.a), self.poly(e.b)
        if len(a) * len(b) > _MAX_EXPANDED_TERMS and len(a) > 1 and len(b) > 1:
            return self.binary_atom("Mul", a, b, e.dtype, commutative=True)
        return divmod_rules.fold_div_mod_pairs(self, P.mul(a, b))

    @handles(FloorDiv)
    def _poly_of_floor_div(self, e):
        return divmod_rules.floordiv(self, self.poly(e.a), self.poly(e.b), e.dtype)

    @handles(FloorMod)
    def _poly_of_floor_mod(self, e):
        return divmod_rules.floormod(self, self.poly(e.a), self.poly(e.b), e.dtype)

    @handles(Div)
    def _poly_of_div(self, e):
        """Truncating integer division: floor division where the numerator is >= 0."""
        a, b = self.poly(e.a), self.poly(e.b)
        ca, cb = P.as_const(a), P.as_const(b)
        if ca is not None and cb:
            q = abs(ca) // abs(cb)
            return P.const(q if (ca >= 0) == (cb > 0) else -q)
        if cb is not None and cb > 0 and self.prove_nonneg(a):
            return divmod_rules.floordiv(self, a, b, e.dtype)
        return self.binary_atom("Div", a, b, e.dtype)

    @handles(Min)
    def _poly_of_min(self, e):
        return self._min_max("Min", self.poly(e.a), self.poly(e.b), e.dtype)

    @handles(Max)
    def _poly_of_max(self, e):
        return self._min_max("Max", self.poly(e.a), self.poly(e.b), e.dtype)

    def _min_max(self, kind: str, a: dict, b: dict, dtype: str) -> dict:
        if self.prove_nonneg(P.add(b, a, -1)):  # a <= b
            return a if kind == "Min" else b
        if self.prove_nonneg(P.add(a, b, -1)):  # b <= a
            return b if kind == "Min" else a
        # min(x + t, y + t) == min(x, y) + t
        common = {m: c for m, c in a.items() if b.get(m) == c}
        if common:
            inner = self._min_max(kind, P.add(a, common, -1), P.add(b, common, -1), dtype)
            return P.add(inner, common)
        return self.binary_atom(kind, a, b, dtype, commutative=True)

    @handles(Select)
    def _poly_of_select(self, e):
        cond = self.simplify(e.condition)
        if isinstance(cond, IntImm):
            return self.poly(e.true_value if cond.value else e.false_value)
        t, f = self.poly(e.true_value), self.poly(e.false_value)
        if t == f:
            return t
        key = ("Select", e.dtype, self.key(cond), P.key(t), P.key(f))
        return P.atom(self.atoms.register(
            key, "Select", (cond, t, f),
            lambda: Select(cond, self.render(t, e.dtype), self.render(f, e.dtype))))

    @handles(Cast)
    def _poly_of_cast(self, e):
        src = e.value
        if _is_int(src) and _is_widening(src.dtype, e.dtype):
            return self.poly(src)  # the value is unchanged; render re-inserts the cast
        inner = self.simplify(src)
        if isinstance(inner, (IntImm, FloatImm)):
            return P.const(int(evaluate(Cast(e.dtype, inner), {})))
        parts = (self.poly(inner),) if _is_int(inner) else ()
        key = ("Cast", e.dtype, self.key(inner))
        return P.atom(self.atoms.register(key, "Cast", parts, lambda: Cast(e.dtype, inner)))

    # ------------------------------------------------------------ atoms
    def binary_atom(self, kind: str, a: dict, b: dict, dtype: str, commutative: bool = False) -> dict:
        ka, kb = P.key(a), P.key(b)
        key = (kind, dtype, frozenset((ka, kb))) if commutative else (kind, dtype, ka, kb)
        if key in self.atoms.info:
            return P.atom(key)
        cls = {"FloorDiv": FloorDiv, "FloorMod": FloorMod, "Div": Div, "Min": Min, "Max": Max,
               "Mul": Mul}[kind]
        ea, eb = self.render(a, dtype), self.render(b, dtype)
        if commutative and self.atoms.text(eb) < self.atoms.text(ea):
            (ea, a), (eb, b) = (eb, b), (ea, a)  # operands in text order, parts to match
        return P.atom(self.atoms.register(key, kind, (a, b), lambda: cls(ea, eb)))

    def _opaque(self, e: PrimExpr) -> dict:
        """An integer node the polynomial layer cannot see into (load, call)."""
        if isinstance(e, IntImm):
            return P.const(int(e.value))
        return P.atom(self.atoms.register(self.key(e), type(e).__name__, (), lambda: e))

    def key(self, e) -> object:
        """Structural key of a simplified expression (Vars and Buffers by identity)."""
        if isinstance(e, (Var, Buffer)):
            return e
        hit = self._keys.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, (IntImm, FloatImm, StringImm)):
            k = (type(e).__name__, e.dtype, e.value)
        else:
            attrs = tuple(getattr(e, a) for a in e._attrs)
            k = (type(e).__name__, attrs, tuple(self._field_key(getattr(e, f)) for f in e._fields))
        self._keys[id(e)] = (e, k)
        return k

    def _field_key(self, value):
        if isinstance(value, (tuple, list)):
            return tuple(self._field_key(v) for v in value)
        return self.key(value)

    def _rebuild(self, e: PrimExpr) -> PrimExpr:
        """``e`` with every PrimExpr child simplified (same object when nothing changed)."""
        if isinstance(e, Call):
            args = tuple(self.simplify(a) for a in e.args)
            return e if all(x is y for x, y in zip(args, e.args)) else Call(e.dtype, e.op, args)
        if isinstance(e, BufferLoad):
            idx = tuple(self.simplify(i) for i in e.indices)
            return e if all(x is y for x, y in zip(idx, e.indices)) else BufferLoad(e.buffer, idx)
        changes = {}
        for f in e._fields:
            old = getattr(e, f)
            if isinstance(old, PrimExpr):
                new = self.simplify(old)
                if new is not old:
                    changes[f] = new
        return e.replace(**changes) if changes else e

    # ------------------------------------------------------------ booleans
    def _boolean(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, CmpOp):
            return self._compare(e)
        if isinstance(e, (And, Or)):
            return self._logic(e)
        if isinstance(e, Not):
            a = self.simplify(e.a)
            if isinstance(a, IntImm):
                return IntImm(not a.value, "bool")
            if isinstance(a, Not):
                return a.a
            if isinstance(a, CmpOp) and _is_int(a.a):  # a NaN makes `x < y` and `x >= y` both false
                return _NEGATED[type(a)](a.a, a.b)
            return Not(a)
        if isinstance(e, Var):
            bound = self.analyzer._bindings.get(e)
            return self.simplify(bound) if bound is not None else e
        if isinstance(e, Select):
            return self._select(e)
        return self._fold(self._rebuild(e))

    def _compare(self, e: CmpOp) -> PrimExpr:
        if not _is_int(e.a):
            return self._fold(self._rebuild(e))
        a, b = self.poly(e.a), self.poly(e.b)
        decided = self._decide(type(e), a, b)
        if decided is not None:
            return IntImm(decided, "bool")
        return type(e)(self.render(a, e.a.dtype), self.render(b, e.b.dtype))

    def _decide(self, cls, a: dict, b: dict):
        """True/False when ``a cls b`` is decided, else None."""
        if cls in (GT, GE):
            cls, a, b = (LT if cls is GT else LE), b, a
        diff = P.add(b, a, -1)  # b - a
        if cls is LT:
            if self.prove_nonneg(P.add(diff, P.const(-1))):
                return True
            return False if self.prove_nonneg(P.scale(diff, -1)) else None
        if cls is LE:
            if self.prove_nonneg(diff):
                return True
            return False if self.prove_nonneg(P.add(P.scale(diff, -1), P.const(-1))) else None
        equal = self._decide_equal(diff)
        if equal is None:
            return None
        return equal if cls is EQ else not equal

    def _decide_equal(self, diff: dict):
        if not diff:
            return True
        if self.prove_nonneg(P.add(diff, P.const(-1))) or \
                self.prove_nonneg(P.add(P.scale(diff, -1), P.const(-1))):
            return False
        # Every variable term is a multiple of g but the constant is not: never zero.
        g = 0
        for m, c in diff.items():
            if m:
                g = gcd(g, c * self.bounds.divisor_of_mono(m))
        constant = diff.get(P.ONE, 0)
        if g > 1 and constant % g:
            return False
        return None

    def _logic(self, e) -> PrimExpr:
        a, b = self.simplify(e.a), self.simplify(e.b)
        absorbing = isinstance(e, Or)  # True absorbs Or, False absorbs And
        for x, other in ((a, b), (b, a)):
            if isinstance(x, IntImm):
                return IntImm(absorbing, "bool") if bool(x.value) == absorbing else other
        if self.key(a) == self.key(b):
            return a
        return type(e)(a, b)

    def _select(self, e: Select) -> PrimExpr:
        cond = self.simplify(e.condition)
        if isinstance(cond, IntImm):
            return self.simplify(e.true_value if cond.value else e.false_value)
        t, f = self.simplify(e.true_value), self.simplify(e.false_value)
        if self.key(t) == self.key(f):
            return t
        return Select(cond, t, f)

    # ------------------------------------------------------------ floats and others
    def _other(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            bound = self.analyzer._bindings.get(e)
            return self.simplify(bound) if bound is not None else e
        if isinstance(e, Select):
            return self._select(e)
        return self._fold(self._rebuild(e))

    def _fold(self, e: PrimExpr) -> PrimExpr:
        """Evaluate arithmetic, comparisons and casts whose operands are all literals."""
        if isinstance(e, (BinaryOp, Cast)) and e.dtype != "handle":
            children = (e.value,) if isinstance(e, Cast) else (e.a, e.b)
            if all(isinstance(c, (IntImm, FloatImm)) for c in children):
                try:
                    return const(evaluate(e, {}), e.dtype)
                except (ZeroDivisionError, ValueError, OverflowError):
                    return e
        return e


def _is_widening(src: str, dst: str) -> bool:
    """An int-to-int cast that preserves every value of ``src``."""
    if dt.is_uint(src) == dt.is_uint(dst):
        return dt.bits(dst) >= dt.bits(src)
    return dt.is_uint(src) and dt.bits(dst) > dt.bits(src)
