"""Float ``floor_divide`` / ``floor_mod`` give NumPy's values on every level (s14-fuzz).

NumPy (and Python) compute a float floor division from ``fmod``: ``1 // 0.1`` is 9 where
``floor(1 / 0.1)`` is 10, ``inf // 2`` and ``inf % 2`` are NaN, ``3 % inf`` is 3. The generated
kernels computed ``floor(a / b)`` and ``a - floor(a / b) * b`` (C, OpenCL; the loop interpreter
for the division), and the constant folder raised Python's ZeroDivisionError / OverflowError.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tensorir import expr as E
from tensorir.arith import evaluate
from tests.targets import VM_TARGETS, built_main

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "DTYPE"), y: R.Tensor(("n",), "DTYPE")):
        with R.dataflow():
            q = R.floor_divide(x, y)
            r = R.floor_mod(x, y)
            R.output(q, r)
        return (q, r)
'''

SPECIAL_X = [np.nan, 1.0, -np.inf, np.inf, -0.0, 0.0, 3.0, -2.0, 1.0, -1.0, 7.5, -7.5, 5.0, 1.0, 0.0]
SPECIAL_Y = [1.0, np.nan, 2.0, -np.inf, 2.0, -3.0, np.inf, -2.0, 0.1, 0.1, -2.0, 2.0, 0.0, -0.0, 0.0]


def _check(target: str, x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        expected = (np.floor_divide(x, y), np.mod(x, y))
    got = built_main(SOURCE.replace("DTYPE", x.dtype.name), target)(x, y)
    for name, g, e in zip(("floor_divide", "floor_mod"), got, expected):
        np.testing.assert_array_equal(g, e, err_msg=f"{name} on {target}, {x.dtype}: x={x!r} y={y!r}")
        # the sign of a zero too (NumPy's -0.0 for -2 % -2 and 0 // -3); a NaN's sign is the device's
        number = ~np.isnan(e)
        np.testing.assert_array_equal(np.signbit(g)[number], np.signbit(e)[number],
                                      err_msg=f"sign of {name} on {target}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("target", VM_TARGETS)
def test_special_values_divide_as_numpy(target, dtype):
    _check(target, np.array(SPECIAL_X, dtype), np.array(SPECIAL_Y, dtype))


def test_the_reference_is_numpy():
    x, y = np.array(SPECIAL_X, np.float32), np.array(SPECIAL_Y, np.float32)
    with np.errstate(all="ignore"):
        q, r = rx.interpret(rx.from_source(SOURCE.replace("DTYPE", "float32")), "main", x, y)
        np.testing.assert_array_equal(q, np.floor_divide(x, y))
        np.testing.assert_array_equal(r, np.mod(x, y))


finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=9), st.sampled_from(["c", "interp"]))
def test_random_quotients_round_as_numpy(pairs, target):
    x = np.array([a for a, _ in pairs], np.float32)
    y = np.array([b if b != 0 else 1.0 for _, b in pairs], np.float32)
    _check(target, x, y)


@pytest.mark.parametrize("a, b", [(1.0, 0.0), (np.inf, 2.0), (np.nan, 1.0), (3.0, np.inf), (1.0, 0.1),
                                  (-7.5, 2.0), (0.0, -3.0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_constant_folder_divides_as_numpy(a, b, dtype):
    scalar = np.dtype(dtype).type
    x, y = E.FloatImm(a, dtype), E.FloatImm(b, dtype)
    with np.errstate(all="ignore"):
        for node, expected in ((E.FloorDiv(x, y), np.floor_divide(scalar(a), scalar(b))),
                               (E.FloorMod(x, y), np.mod(scalar(a), scalar(b))),
                               (E.Div(x, y), np.true_divide(scalar(a), scalar(b)))):
            np.testing.assert_array_equal(evaluate(node, {}), expected, err_msg=repr(node))


@pytest.mark.parametrize("op, args, expected", [("log", [0.0], -np.inf), ("sqrt", [-1.0], np.nan),
                                                ("exp", [1000.0], np.inf), ("floor", [np.inf], np.inf),
                                                ("pow", [0.0, -1.0], np.inf), ("exp2", [5000.0], np.inf)])
def test_the_constant_folder_takes_ieee_values_where_python_math_raises(op, args, expected):
    value = evaluate(E.Call("float32", op, [E.FloatImm(a, "float32") for a in args]), {})
    np.testing.assert_array_equal(value, np.float32(expected))

