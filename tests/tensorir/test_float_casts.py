"""``tensorir.float_casts``: the float -> integer rule every level shares, against NumPy's own
element loop (each value converted alone), and the constant folder taking the same rule."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorir.arith import evaluate, simplify
from tensorir.expr import Cast, FloatImm
from tensorir.float_casts import VIA, float_to_int

SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 2.0**31, -2.0**31, 2.0**32, 2.0**63, -2.0**63, 2.0**64, 1e30,
           -1e30, 3000000001.0, -3000000001.0, 2147483904.0, 1.5, -1.5]


def element_loop(x: np.ndarray, dtype: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.array([x[i:i + 1].astype(dtype)[0] for i in range(len(x))], dtype)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
@pytest.mark.parametrize("dtype", sorted(VIA))
def test_special_values_convert_as_numpy_converts_each_alone(src, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # float16 holds no 2**31: inf
        x = np.array(SPECIAL, src)
    got = float_to_int(x, dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, element_loop(x, dtype))


@settings(max_examples=60, deadline=None)
@given(src=st.sampled_from(["float32", "float64"]), dtype=st.sampled_from(sorted(VIA)),
       values=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=40),
       scale=st.sampled_from([1.0, 2.0**20, 2.0**40, 2.0**60, -2.0**33]))
def test_drawn_values_convert_as_numpy_converts_each_alone(src, dtype, values, scale):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        x = np.array(values, src) * np.array(scale, src)
    np.testing.assert_array_equal(float_to_int(x, dtype), element_loop(x, dtype))


def test_a_scalar_gives_a_scalar():
    assert float_to_int(np.float32(-1.0), "uint32").shape == ()
    assert int(float_to_int(-1.0, "uint64")) == 2**64 - 1


@pytest.mark.parametrize("value", [np.nan, np.inf, -1e10, 1e10, -1.0, 2.0**63, 3e9, -2.7])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32", "uint64"])
def test_constant_folding_takes_the_run_time_value(value, dtype):
    """s13: the constant folder truncated and wrapped (``T.Cast("int32", 1e10)`` folded to
    1410065408 where the generated code gives -2**31) and refused NaN / inf."""
    want = int(element_loop(np.array([value], "float32"), dtype)[0])
    expr = Cast(dtype, FloatImm(value, "float32"))
    assert evaluate(expr, {}) == want
    folded = simplify(expr)
    assert getattr(folded, "value", None) == want
