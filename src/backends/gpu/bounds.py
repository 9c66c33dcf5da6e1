"""Constant bounds of symbolic extents: how many threads or elements a clipped tile can need.

Edge tiles have extents such as ``min(i*32 + 31, n - 1) - i*32 + 1`` or, as a
hull of several accesses, ``max(min(i*32 + 31, n - 1) // 16 * 16 + 15,
i*32 + 31) - i*32 + 1``; the simplifier does not bound them. ``lift`` moves
every min/max outward through + - * // (by constants), so that the terms
that cancel meet: ``max(a, b) - c`` becomes ``max(a - c, b - c)``. Then an
upper bound of a max is the larger of its arguments' bounds, of a min the
smaller of the ones found, and of anything else the analyzer's constant
bound.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.arith import Analyzer

_FLIP = {E.Min: E.Max, E.Max: E.Min}


def _const(e) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def lift(e):
    """``e`` with min/max moved outside of + - and multiplication/floor division by constants."""
    if isinstance(e, (E.Min, E.Max)):
        return type(e)(lift(e.a), lift(e.b))
    if isinstance(e, (E.Add, E.Sub)):
        a, b = lift(e.a), lift(e.b)
        op = type(e)
        if isinstance(a, (E.Min, E.Max)):
            return type(a)(lift(op(a.a, b)), lift(op(a.b, b)))
        if isinstance(b, (E.Min, E.Max)):
            outer = type(b) if op is E.Add else _FLIP[type(b)]   # x - max(p, q) = min(x - p, x - q)
            return outer(lift(op(a, b.a)), lift(op(a, b.b)))
        return op(a, b)
    if isinstance(e, (E.Mul, E.FloorDiv)):
        a, c = lift(e.a), _const(e.b)
        if isinstance(a, (E.Min, E.Max)) and c is not None and c != 0:
            outer = type(a) if c > 0 else _FLIP[type(a)]
            if isinstance(e, E.FloorDiv) and c < 0:
                return type(e)(a, e.b)
            return outer(lift(type(e)(a.a, e.b)), lift(type(e)(a.b, e.b)))
        return type(e)(a, e.b)
    return e


def _bound(e, analyzer: Analyzer, upper: bool) -> int | None:
    if isinstance(e, (E.Min, E.Max)):
        a, b = _bound(e.a, analyzer, upper), _bound(e.b, analyzer, upper)
        # the bound of max(a, b) from above needs both sides; of min(a, b), either will do
        both = isinstance(e, E.Max) == upper
        if both:
            return None if a is None or b is None else (max(a, b) if upper else min(a, b))
        found = [x for x in (a, b) if x is not None]
        return (min(found) if upper else max(found)) if found else None
    try:
        lo, hi = analyzer.const_int_bound(analyzer.simplify(e))
    except Exception:  # noqa: BLE001 - no bound for this term
        return None
    return hi if upper else lo


def constant_upper_bound(e, analyzer: Analyzer | None = None) -> int | None:
    """A constant >= ``e`` wherever it is evaluated, or None."""
    analyzer = analyzer or Analyzer()
    if isinstance(e, E.IntImm):
        return e.value
    direct = _bound(e, analyzer, True)
    lifted = _bound(lift(e), analyzer, True)
    found = [x for x in (direct, lifted) if x is not None]
    return min(found) if found else None


def constant_lower_bound(e, analyzer: Analyzer | None = None) -> int | None:
    """A constant <= ``e`` wherever it is evaluated, or None."""
    analyzer = analyzer or Analyzer()
    if isinstance(e, E.IntImm):
        return e.value
    direct = _bound(e, analyzer, False)
    lifted = _bound(lift(e), analyzer, False)
    found = [x for x in (direct, lifted) if x is not None]
    return max(found) if found else None
