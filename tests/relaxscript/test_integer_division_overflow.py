"""The smallest integer divided by -1 wraps, as in NumPy, on every level (s14-fuzz).

x86's division traps on INT32_MIN / -1 and INT64_MIN / -1: a generated kernel for ``R.divide``,
``R.mod`` (int32, int64) or ``R.floor_divide`` / ``R.floor_mod`` (int64) killed the process with
SIGFPE (s11 had checked the int32 floor division only, which runs in int64). And the reference's
truncating ``divide`` took ``|a| // |b|``, which is wrong where ``|a|`` wraps: int8 -128 / 8 gave 16.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tests.targets import VM_TARGETS, built_main

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "DTYPE"), y: R.Tensor(("n",), "DTYPE")):
        with R.dataflow():
            d = R.divide(x, y)
            m = R.mod(x, y)
            q = R.floor_divide(x, y)
            r = R.floor_mod(x, y)
            R.output(d, m, q, r)
        return (d, m, q, r)
'''
DTYPES = ["int8", "int16", "int32", "int64"]


def _expected(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """C's truncating division and remainder and NumPy's floor ones, on Python ints, wrapped."""
    bits = x.dtype.itemsize * 8

    def wrap(v: int) -> int:
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >= 1 << (bits - 1) else v

    out = [[], [], [], []]
    for a, b in zip(x.tolist(), y.tolist()):
        t = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        out[0].append(wrap(t))
        out[1].append(wrap(a - t * b))
        out[2].append(wrap(a // b))
        out[3].append(wrap(a % b))
    return [np.array(o, x.dtype) for o in out]


def _check(target: str, x: np.ndarray, y: np.ndarray) -> None:
    source = SOURCE.replace("DTYPE", x.dtype.name)
    with np.errstate(all="ignore"):
        got = built_main(source, target)(x, y) if target != "reference" else \
            rx.interpret(rx.from_source(source), "main", x, y)
    for name, g, e in zip(("divide", "mod", "floor_divide", "floor_mod"), got, _expected(x, y)):
        np.testing.assert_array_equal(g, e, err_msg=f"{name} on {target}, x={x!r}, y={y!r}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", ["reference", *VM_TARGETS])
def test_the_smallest_integer_over_minus_one_wraps(target, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min, info.min, info.max, -7, 7, -128, info.min + 1], dtype)
    y = np.array([-1, 1, 8, -1, -1, -2, 8, -1], dtype)
    _check(target, x, y)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(DTYPES), st.sampled_from(["reference", "c", "interp"]), st.data())
def test_random_integer_divisions(dtype, target, data):
    info = np.iinfo(dtype)
    edge = st.sampled_from([int(info.min), int(info.max), -1, 1, 0])
    values = st.one_of(edge, st.integers(int(info.min), int(info.max)))
    pairs = data.draw(st.lists(st.tuples(values, values.filter(lambda v: v != 0)), min_size=1, max_size=8))
    _check(target, np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype))
