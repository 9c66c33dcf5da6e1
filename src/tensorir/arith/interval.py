"""Closed integer intervals with infinite ends, for constant bound analysis.

Ends are Python ints or +-inf floats. Products take care never to form
``0 * inf`` (which would be NaN): a factor that is exactly zero wins.
"""
from __future__ import annotations

import math

INF = math.inf
UNBOUNDED = (-INF, INF)


def _mul_end(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def scale(a, k: int):
    if k == 0:
        return (0, 0)
    lo, hi = _mul_end(a[0], k), _mul_end(a[1], k)
    return (lo, hi) if k > 0 else (hi, lo)


def mul(a, b):
    corners = [_mul_end(x, y) for x in a for y in b]
    return (min(corners), max(corners))


def power(a, k: int):
    out = (1, 1)
    for _ in range(k):
        out = mul(out, a)
    if k % 2 == 0 and out[0] < 0:  # an even power is never negative
        out = (0, out[1])
    return out


def _floor_div_end(x, c: int):
    return x if x in (INF, -INF) else x // c


def floordiv_const(a, c: int):
    """Bounds of ``x // c`` for ``x`` in ``a`` and a constant ``c > 0``."""
    return (_floor_div_end(a[0], c), _floor_div_end(a[1], c))


def floormod_const(a, c: int):
    """Bounds of ``x % c`` for ``x`` in ``a`` and a constant ``c > 0``."""
    lo, hi = a
    if lo not in (INF, -INF) and hi not in (INF, -INF) and lo // c == hi // c:
        return (lo % c, hi % c)
    return (0, c - 1)


def floordiv_positive(a, d):
    """Bounds of ``x // y`` for ``x`` in ``a`` and ``y`` in ``d`` with ``d[0] >= 1``."""
    lo, hi = a
    # x >= lo < 0 and y >= 1 give x / y >= lo; for lo >= 0 the largest divisor is the worst case.
    new_lo = lo if lo < 0 else (0 if d[1] == INF else lo // d[1])
    new_hi = hi // d[0] if hi >= 0 and hi != INF else (INF if hi == INF else 0)
    return (new_lo, new_hi)


def union(a, b):
    return (min(a[0], b[0]), max(a[1], b[1]))


def intersect(a, b):
    return (max(a[0], b[0]), min(a[1], b[1]))


def min_of(a, b):
    return (min(a[0], b[0]), min(a[1], b[1]))


def max_of(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]))


def dtype_range(dtype: str):
    """Values an integer of ``dtype`` can hold; 64-bit types count as unbounded."""
    from .. import dtype as dt
    if dtype == "bool":
        return (0, 1)
    bits = dt.bits(dtype)
    if dt.is_uint(dtype):
        return (0, INF if bits >= 64 else 2 ** bits - 1)
    if dt.is_int(dtype) and bits < 64:
        return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return UNBOUNDED


def to_api(a):
    """Interval as the public ``(lo, hi)`` pair with ``None`` for an infinite end."""
    lo, hi = a
    return (None if lo == -INF else int(lo), None if hi == INF else int(hi))
