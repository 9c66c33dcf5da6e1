"""R.shape_to_tensor and R.tensor_to_shape as TVM writes them: a shape computed as a
tensor, turned back into a shape value and named with R.match_cast, on the
interpreter and both VMs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

SHAPES = '''
@R.function
def main(x: R.Tensor(("n", "m"), dtype="float32")):
    n = T.int64()
    m = T.int64()
    a = T.int64()
    b = T.int64()
    dims: R.Tensor((2,), dtype="int64") = R.shape_to_tensor(R.shape([n, m]))
    doubled: R.Tensor((2,), dtype="int64") = R.multiply(dims, R.const(2, "int64"))
    s: R.Shape(ndim=2) = R.tensor_to_shape(doubled)
    named: R.Shape([a, b]) = R.match_cast(s, R.Shape([a, b]))
    z: R.Tensor((a, b), dtype="float32") = R.zeros(named, dtype="float32")
    return (dims, z)
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(0, 4), m=st.integers(1, 4))
def test_shape_tensor_round_trip_runs_on_every_target(n, m):
    mod = module_of(SHAPES)
    dims, z = assert_runs_alike(mod, np.ones((n, m), "float32"))
    np.testing.assert_array_equal(dims, [n, m])
    assert z.shape == (2 * n, 2 * m)


def test_shape_tensor_module_round_trips():
    text = assert_round_trip(module_of(SHAPES))
    assert "R.tensor_to_shape(doubled)" in text and "R.shape_to_tensor(R.shape([n, m]))" in text


@pytest.mark.parametrize("call, message", [
    ("R.tensor_to_shape(R.astype(x, 'int64'))", "expects a 1-D tensor"),
    ("R.tensor_to_shape(R.astype(R.flatten(x), 'int64'))", "must be a constant"),
    ("R.tensor_to_shape(R.zeros((2,), 'float32'))", "expects an integer tensor"),
])
def test_bad_tensor_to_shape_is_clear(call, message):
    text = f'''
@R.function
def main(x: R.Tensor(("n", 2), dtype="float32")):
    y = {call}
    return y
'''
    with pytest.raises((OpDeductionError, ParseError), match=message):
        module_of(text)
