"""Deciding ``p >= 0`` for a canonical polynomial ``p`` (sound, incomplete).

First the constant bounds. Then rounds of lowering: a var with a symbolic
range (a loop var in ``[0, n)``, a constraint ``i < n``) is replaced by the
end of its range that minimises its term, ``max(a, b)`` with a positive
coefficient by ``a`` (``min`` with a negative one), ``d * (x // d)`` by
``x`` or ``x - d + 1``; and known non-negative constraints are subtracted.
Each step only lowers the value, so a non-negative result proves the original.
"""
from __future__ import annotations

from math import gcd

from ..expr import Var
from . import poly as P

_SUBSTITUTION_ROUNDS = 4


def prove_nonneg(analyzer, p: dict) -> bool:
    key = P.key(p)
    known = analyzer._proofs.get(key)
    if known is None:
        known = analyzer._proofs[key] = _prove_nonneg(analyzer, p)
    return known


def _prove_nonneg(analyzer, p: dict) -> bool:
    bounds = analyzer._bounds
    if bounds.of_poly(p)[0] >= 0:
        return True
    current = _clear_floordiv_denominators(analyzer, p)
    for _ in range(_SUBSTITUTION_ROUNDS + 1):
        if _dominates_known(analyzer, current):
            return True
        lowered = _substitute_lower(analyzer, current)
        if lowered is None:
            return False
        current = lowered
        if bounds.of_poly(current)[0] >= 0:
            return True
    return False


def _dominates_known(analyzer, p: dict) -> bool:
    """``p - k >= 0`` for some known ``k >= 0``."""
    bounds = analyzer._bounds
    for k in analyzer._known:
        if bounds.of_poly(P.add(p, k, -1))[0] >= 0:
            return True
    return False


def _substitute_lower(analyzer, p: dict):
    """A polynomial <= ``p`` with symbolically bounded vars replaced, or None if nothing changed."""
    bounds = analyzer._bounds
    out: dict = {}
    changed = False
    for m, c in p.items():
        replaced = _atom_lower(analyzer, m, c)
        for k, power in ([] if replaced is not None else m):
            if power != 1 or not isinstance(k, Var) or k not in analyzer._symbolic_vars:
                continue
            rest = P.mono_divide(m, frozenset(((k, 1),)))
            lo, hi = bounds.of_mono(rest)
            if (c > 0 and lo >= 0) or (c < 0 and hi <= 0):
                ends = analyzer._lower_polys.get(k)  # term grows with k: take k's least value
            elif (c > 0 and hi <= 0) or (c < 0 and lo >= 0):
                ends = analyzer._upper_polys.get(k)
            else:
                continue
            if ends:
                replaced = P.mul({rest: c}, ends[-1])
                break
        if replaced is None:
            out = P.add(out, {m: c})
        else:
            out = P.add(out, replaced)
            changed = True
    return out if changed else None


def _atom_lower(analyzer, m: frozenset, c: int):
    """A lower bound of the term ``c * atom`` through the atom's operands, or None.

    ``max(a, b) >= a``, ``min(a, b) <= a``, and for ``d > 0``:
    ``x - d + 1 <= d * (x // d) <= x`` (used when ``d`` divides ``c``).
    """
    hit = P.single_atom({m: c})
    if hit is None or isinstance(hit[0], Var):
        return None
    info = analyzer._atoms.info[hit[0]]
    if (info.kind == "Max" and c > 0) or (info.kind == "Min" and c < 0):
        return P.scale(info.parts[0], c)
    if info.kind == "FloorDiv":
        x, d = info.parts
        d = P.as_const(d)
        if d is not None and d > 0 and c % d == 0:
            return P.scale(x if c < 0 else P.add(x, P.const(1 - d)), c // d)
    return None


_MAX_SCALE = 1024


def _clear_floordiv_denominators(analyzer, p: dict) -> dict:
    """``p`` times the lcm of its floordiv divisors (same sign, so the claim is unchanged)."""
    scale = 1
    for m, c in p.items():
        hit = P.single_atom({m: c})
        if hit is None or isinstance(hit[0], Var):
            continue
        info = analyzer._atoms.info[hit[0]]
        d = P.as_const(info.parts[1]) if info.kind == "FloorDiv" else None
        if d is not None and d > 0 and c % d:
            scale = scale * d // gcd(scale, d)
    return P.scale(p, scale) if 1 < scale <= _MAX_SCALE else p
