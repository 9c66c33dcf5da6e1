"""R.collapse_sum_to / R.collapse_sum_like as TVM's gradient code writes them: round trip
and results equal to NumPy sums on the interpreter and the C build, including a
target dim that is 1 or the data's dim only at run time."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

COLLAPSE = '''
@R.function
def main(grad: R.Tensor((3, "n", 4), dtype="float32"), bias: R.Tensor(("m", 4), dtype="float32")):
    n = T.int64()
    m = T.int64()
    with R.dataflow():
        to_row: R.Tensor((1, 4), dtype="float32") = R.collapse_sum_to(grad, R.shape([1, 4]))
        to_col: R.Tensor((n, 1), dtype="float32") = R.collapse_sum_to(grad, R.shape([n, 1]))
        like: R.Tensor((m, 4), dtype="float32") = R.collapse_sum_like(grad, bias)
        gv = (to_row, to_col, like)
        R.output(gv)
    return gv
'''


@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 5), bias_rows_one=st.booleans(), seed=st.integers(0, 2**31))
def test_collapse_sums_match_numpy_on_every_target(n, bias_rows_one, seed):
    rng = np.random.default_rng(seed)
    grad = rng.standard_normal((3, n, 4)).astype("float32")
    bias = np.zeros((1 if bias_rows_one else n, 4), "float32")   # m is 1 or n at run time
    to_row, to_col, like = assert_runs_alike(module_of(COLLAPSE), grad, bias, tol=1e-4)
    np.testing.assert_allclose(to_row, grad.sum(axis=(0, 1))[None], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_col, grad.sum(axis=(0, 2))[:, None], rtol=1e-5, atol=1e-5)
    want = grad.sum(axis=0)
    if bias_rows_one:
        want = want.sum(axis=0, keepdims=True)
    np.testing.assert_allclose(like, want, rtol=1e-5, atol=1e-5)


def test_collapse_sums_round_trip():
    text = assert_round_trip(module_of(COLLAPSE))
    assert "R.collapse_sum_like(grad, bias)" in text


def test_a_target_that_does_not_broadcast_is_an_error():
    text = '''
@R.function
def main(x: R.Tensor((3, 4), dtype="float32")):
    y = R.collapse_sum_to(x, R.shape([3, 5]))
    return y
'''
    with pytest.raises((OpDeductionError, ParseError), match="does not broadcast to data"):
        module_of(text)
