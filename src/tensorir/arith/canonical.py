"""Atoms of the canonical form and rendering polynomials back to PrimExprs.

An atom is whatever the polynomial layer cannot look inside: a Var or an
irreducible node such as ``floordiv(x, 3)``. The table remembers, per atom
key, the PrimExpr to emit, the pieces the rules and bound analysis need, and a
sort key that fixes the printed order: variables first (by name, then by first
appearance), then other atoms by their text.
"""
from __future__ import annotations

from math import gcd

from ..expr import (Add, BinaryOp, BufferLoad, Call, Cast, FloatImm, IntImm, Max, Min, Mul, Not,
                    PrimExpr, Select, StringImm, Sub, Var)
from . import poly as P


class AtomInfo:
    __slots__ = ("expr", "kind", "parts", "sort_key")

    def __init__(self, expr, kind, parts, sort_key):
        self.expr, self.kind, self.parts, self.sort_key = expr, kind, parts, sort_key


class AtomTable:
    """Per-Analyzer registry of atoms (it grows only with what that analyzer sees)."""

    def __init__(self):
        self.info: dict = {}
        self._text: dict[int, str] = {}  # id(atom expr) -> text; the table keeps the expr alive
        self._var_serial = 0

    def var(self, v: Var):
        if v not in self.info:
            self._var_serial += 1
            self.info[v] = AtomInfo(v, "Var", (), (0, v.name, self._var_serial))
        return v

    def register(self, key, kind: str, parts: tuple, build):
        """Return ``key``, building and recording the atom's expression the first time."""
        if key not in self.info:
            expr = build()
            text = self.text(expr)
            self._text[id(expr)] = text
            self.info[key] = AtomInfo(expr, kind, parts, (1, text, 0))
        return key

    # ------------------------------------------------------------ ordering text
    def text(self, e) -> str:
        """Cheap readable text of an expression, used only to order atoms."""
        hit = self._text.get(id(e))
        if hit is not None:
            return hit
        if isinstance(e, Var):
            return e.name
        if isinstance(e, (IntImm, FloatImm)):
            return repr(e.value)
        if isinstance(e, StringImm):
            return repr(e.value)
        if isinstance(e, (Min, Max)):
            return f"{type(e).__name__.lower()}({self.text(e.a)}, {self.text(e.b)})"
        if isinstance(e, BinaryOp):
            return f"({self.text(e.a)} {e.symbol} {self.text(e.b)})"
        if isinstance(e, Cast):
            return f"{e.dtype}({self.text(e.value)})"
        if isinstance(e, Not):
            return f"not {self.text(e.a)}"
        if isinstance(e, Select):
            parts = (e.condition, e.true_value, e.false_value)
            return "select(" + ", ".join(self.text(x) for x in parts) + ")"
        if isinstance(e, Call):
            return f"{e.op}(" + ", ".join(self.text(x) for x in e.args) + ")"
        if isinstance(e, BufferLoad):
            return f"{e.buffer.name}[" + ", ".join(self.text(x) for x in e.indices) + "]"
        return type(e).__name__

    # ------------------------------------------------------------ rendering
    def _mono_sort_key(self, m: frozenset):
        keys = []
        for k, power in m:
            keys.extend([self.info[k].sort_key] * power)
        keys.sort()
        return keys

    def _atom_expr(self, k, dtype: str) -> PrimExpr:
        e = self.info[k].expr
        # Widening int casts are transparent in the polynomial; re-insert them here.
        return e if e.dtype == dtype else Cast(dtype, e)

    def _term(self, m: frozenset, coeff: int, dtype: str) -> PrimExpr:
        atoms = sorted(m, key=lambda kp: self.info[kp[0]].sort_key)
        out = None
        for k, power in atoms:
            for _ in range(power):
                e = self._atom_expr(k, dtype)
                out = e if out is None else Mul(out, e)
        return out if coeff == 1 else Mul(out, IntImm(coeff, dtype))

    def render(self, p: dict, dtype: str) -> PrimExpr:
        """The readable PrimExpr of polynomial ``p``.

        Terms come in sort order with positive ones first, subtraction as Sub,
        the constant last, and a common factor pulled out: ``(n + 1) * 4``.
        """
        constant = p.get(P.ONE, 0)
        terms = sorted(((self._mono_sort_key(m), m, c) for m, c in p.items() if m),
                       key=lambda t: t[0])
        if not terms:
            return IntImm(constant, dtype)
        coeffs = [c for _, _, c in terms] + ([constant] if constant else [])
        if len(coeffs) >= 2:
            g = 0
            for c in coeffs:
                g = gcd(g, c)
            if all(c < 0 for c in coeffs):
                g = -g
            if g != 1:
                inner = [(s, m, c // g) for s, m, c in terms]
                return Mul(self._sum(inner, constant // g, dtype), IntImm(g, dtype))
        return self._sum(terms, constant, dtype)

    def _sum(self, terms, constant: int, dtype: str) -> PrimExpr:
        positive = [(m, c) for _, m, c in terms if c > 0]
        negative = [(m, -c) for _, m, c in terms if c < 0]
        if positive:
            acc = self._term(*positive[0], dtype)
            for m, c in positive[1:]:
                acc = Add(acc, self._term(m, c, dtype))
        elif constant > 0:
            acc, constant = IntImm(constant, dtype), 0
        else:  # a lone negative term (sums of negatives had -g factored out)
            m, c = negative.pop(0)
            acc = self._term(m, -c, dtype)
        for m, c in negative:
            acc = Sub(acc, self._term(m, c, dtype))
        if constant > 0:
            acc = Add(acc, IntImm(constant, dtype))
        elif constant < 0:
            acc = Sub(acc, IntImm(-constant, dtype))
        return acc

