"""Deciding ``p >= 0`` for a canonical polynomial ``p`` (sound, incomplete).

First the constant bounds; then, where the analyzer knows symbolic facts
(a loop var in ``[0, n)``, a constraint ``i < n``), each occurrence of such a
var is replaced by the end of its range that minimises the term, and the
known non-negative constraints are subtracted. Each step only lowers the
value, so a non-negative result proves the original.
"""
from __future__ import annotations

from ..expr import Var
from . import poly as P

_SUBSTITUTION_ROUNDS = 4


def prove_nonneg(analyzer, p: dict) -> bool:
    bounds = analyzer._bounds
    if bounds.of_poly(p)[0] >= 0:
        return True
    if not (analyzer._known or analyzer._symbolic_vars):
        return False
    current = p
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
        replaced = None
        for k, power in m:
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
