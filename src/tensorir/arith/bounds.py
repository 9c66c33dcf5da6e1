"""Constant interval bounds of canonical polynomials and their atoms.

Bounds of a Var combine its facts (``lower``/``upper``/``multiple_of``), the
range it is bound to, and constraints in scope. Results are memoised until
the analyzer's state changes; a Var whose bound depends on itself (through
constraints) counts as unbounded while it is being computed.
"""
from __future__ import annotations

from math import gcd

from .. import dtype as dt
from ..expr import Var
from . import interval as iv
from . import poly as P
from .interval import INF, UNBOUNDED


class Bounds:
    def __init__(self, analyzer):
        self.analyzer = analyzer
        self._memo: dict = {}
        self._active: set = set()

    def clear(self) -> None:
        self._memo.clear()

    # ------------------------------------------------------------ polynomials
    def of_poly(self, p: dict):
        total = (0, 0)
        for m, c in p.items():
            total = iv.add(total, iv.scale(self.of_mono(m), c))
            if total == UNBOUNDED:
                break
        return total

    def of_mono(self, m: frozenset):
        out = (1, 1)
        for k, power in m:
            out = iv.mul(out, iv.power(self.of_atom(k), power))
        return out

    def of_atom(self, k):
        hit = self._memo.get(k)
        if hit is not None:
            return hit
        if k in self._active:
            return UNBOUNDED
        self._active.add(k)
        try:
            result = self._var(k) if isinstance(k, Var) else self._compound(k)
        finally:
            self._active.discard(k)
        self._memo[k] = result
        return result

    # ------------------------------------------------------------ atoms
    def _var(self, v: Var):
        an = self.analyzer
        lo = -INF if v.lower is None else v.lower
        hi = INF if v.upper is None else v.upper
        if dt.is_uint(v.dtype) or v.dtype == "bool":
            lo = max(lo, 0)
        for p in an._lower_polys.get(v, ()):
            lo = max(lo, self.of_poly(p)[0])
        for p in an._upper_polys.get(v, ()):
            hi = min(hi, self.of_poly(p)[1])
        step = self.divisor_of_var(v)
        if step > 1:  # a multiple of `step` lies on the grid
            if lo not in (INF, -INF):
                lo = -((-lo) // step) * step
            if hi not in (INF, -INF):
                hi = (hi // step) * step
        return (lo, hi)

    def _compound(self, k):
        info = self.analyzer._atoms.info[k]
        kind, parts = info.kind, info.parts
        if kind == "FloorDiv" or (kind == "Div" and self.of_poly(parts[0])[0] >= 0):
            return self._floordiv(*parts)
        if kind == "FloorMod":
            return self._floormod(*parts)
        if kind in ("Min", "Max"):
            a, b = self.of_poly(parts[0]), self.of_poly(parts[1])
            return iv.min_of(a, b) if kind == "Min" else iv.max_of(a, b)
        if kind == "Select":
            return iv.union(self.of_poly(parts[1]), self.of_poly(parts[2]))
        if kind == "Mul":
            return iv.mul(self.of_poly(parts[0]), self.of_poly(parts[1]))
        if kind == "Cast" and parts:
            inner, limits = self.of_poly(parts[0]), iv.dtype_range(info.expr.dtype)
            fits = limits[0] <= inner[0] and inner[1] <= limits[1]
            return inner if fits else limits
        return iv.dtype_range(info.expr.dtype)

    def _floordiv(self, a: dict, b: dict):
        xa, c = self.of_poly(a), P.as_const(b)
        if c is not None and c > 0:
            return iv.floordiv_const(xa, c)
        d = self.of_poly(b)
        return iv.floordiv_positive(xa, d) if d[0] >= 1 else UNBOUNDED

    def _floormod(self, a: dict, b: dict):
        c = P.as_const(b)
        if c is not None and c > 0:
            return iv.floormod_const(self.of_poly(a), c)
        d = self.of_poly(b)
        if d[0] < 1:
            return UNBOUNDED
        out = (0, d[1] - 1)
        xa = self.of_poly(a)
        return iv.intersect(out, (0, xa[1])) if xa[0] >= 0 else out

    # ------------------------------------------------------------ divisibility
    def divisor_of_var(self, v: Var) -> int:
        known = self.analyzer._divisors.get(v, 1)
        fact = v.multiple_of or 1
        return fact * known // gcd(fact, known)

    def divisor_of_mono(self, m: frozenset) -> int:
        """A positive integer known to divide every value of monomial ``m``."""
        out = 1
        for k, power in m:
            if isinstance(k, Var):
                out *= self.divisor_of_var(k) ** power
        return out

