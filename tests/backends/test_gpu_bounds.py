"""Constant bounds of clipped tile extents (backends/gpu/bounds.py)."""
from __future__ import annotations

import tensorir as tir
from backends.gpu.bounds import constant_lower_bound, constant_upper_bound, lift
from tensorir import expr as E

i, n = tir.size_var("i"), tir.size_var("n")


def test_lift_moves_min_max_outward():
    # Before: max(a, b) - c; Expected: max(a - c, b - c)
    tir.assert_structural_equal(lift(E.max_(i * 4, n) - i), E.max_(i * 4 - i, n - i))
    # x - min(p, q) = max(x - p, x - q); // and * by a positive constant keep the order
    tir.assert_structural_equal(lift(n - E.min_(i, n)), E.max_(n - i, n - n))
    tir.assert_structural_equal(lift(E.min_(i, n) // 16 * 16),
                                E.min_(i // 16 * 16, n // 16 * 16))
    # a negative factor swaps min and max
    tir.assert_structural_equal(lift(E.min_(i, n) * -2), E.max_(i * -2, n * -2))


def test_constant_bounds_of_edge_tiles():
    assert constant_upper_bound(E.min_(i * 4 + 3, n - 1) - i * 4 + 1) == 4
    hull = E.max_(E.min_(i * 32 + 31, n - 1) // 16 * 16 + 15, i * 32 + 31) - i * 32 + 1
    assert constant_upper_bound(hull) == 32
    assert constant_upper_bound(n - i) is None          # grows with n
    assert constant_lower_bound(E.min_(i * 4, n) - E.min_(i * 4, n)) == 0
    assert constant_upper_bound(E.IntImm(7, "int64")) == 7
