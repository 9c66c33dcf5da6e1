"""Integer arithmetic wraps in its dtype, as NumPy's, on every level (s14-fuzz).

Generated C computed int8/int16/uint8/uint16 arithmetic in C's int without narrowing it (a fused
``greater(add(x, 1), x)`` at x = 127 compared 128 with 127: True where NumPy wraps to -128 and
says False), and signed int32/int64 overflow is undefined in C and OpenCL C: gcc and PoCL folded
``x + 1 > x`` to True. The emitters now compute value arithmetic in the unsigned type of the width
(``SourceEmitter.infix``); buffer indices stay plain (they cannot overflow).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.targets import VM_TARGETS, built_main

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "DTYPE"), y: R.Tensor(("n",), "DTYPE")):
        with R.dataflow():
            s = R.add(x, y)
            d = R.subtract(x, y)
            p = R.multiply(x, y)
            grows = R.greater(R.add(x, R.const(1, "DTYPE")), x)
            doubled_smaller = R.less(R.multiply(x, R.const(2, "DTYPE")), x)
            R.output(s, d, p, grows, doubled_smaller)
        return (s, d, p, grows, doubled_smaller)
'''
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _expected(x, y):
    one, two = x.dtype.type(1), x.dtype.type(2)
    with np.errstate(all="ignore"):
        return (x + y, x - y, x * y, (x + one) > x, (x * two) < x)


def _check(target: str, x: np.ndarray, y: np.ndarray) -> None:
    got = built_main(SOURCE.replace("DTYPE", x.dtype.name), target)(x, y)
    for name, g, e in zip(("add", "subtract", "multiply", "x + 1 > x", "2 * x < x"), got, _expected(x, y)):
        np.testing.assert_array_equal(g, e, err_msg=f"{name} on {target}, x={x!r}, y={y!r}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", VM_TARGETS)
def test_overflow_wraps_as_numpy(target, dtype):
    info = np.iinfo(dtype)
    values = [info.max, info.min, info.max // 2 + 1, 5, 0, 1, info.max - 1] * 3   # 21: vector body and tail
    x = np.array(values, dtype)
    y = np.array(values[::-1], dtype)
    _check(target, x, y)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(DTYPES), st.data())
def test_random_integer_arithmetic_wraps_on_c(dtype, data):
    info = np.iinfo(dtype)
    values = st.one_of(st.sampled_from([int(info.min), int(info.max), 0, 1]), st.integers(int(info.min), int(info.max)))
    pairs = data.draw(st.lists(st.tuples(values, values), min_size=1, max_size=20))
    _check("c", np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype))
