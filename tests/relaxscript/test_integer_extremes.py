"""Every integer elementwise op at its dtype's extremes on every VM target, against the interpreter.

Values are drawn from each dtype's edges (min, min + 1, -1, 0, 1, max - 1, max, half of max) and
at random; the pairs of a binary op cross them. What it found: `abs` of uint64 values from 2**63
(C and CUDA read them through llabs as negative), and integer powers computed in float32. A zero
integer divisor is left out: kernels raise KernelDivisionByZeroError there while NumPy gives 0
(tests/backends/test_c_zero_division.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.op import binary, unary
from tests.relaxscript.tvm_compat import module_of
from tests.targets import AVAILABLE_VM_TARGETS, built_main

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
UNARY = sorted(name for name, (_, kind) in unary._UNARY.items() if kind in ("same", "int", "bool"))
BINARY = sorted([*binary._ARITH, *binary._COMPARE, *binary._LOGICAL, *binary._BITWISE])
DIVIDING = {"divide", "floor_divide", "floor_mod", "mod"}

def edge_values(dtype: str) -> list[int]:
    info = np.iinfo(dtype)
    picks = {info.min, info.min + 1, 0, 1, 2, 7, info.max - 1, info.max, info.max // 2}
    if info.min < 0:
        picks |= {-1, -2, -(info.max // 3)}
    return sorted(picks)


def values(data, dtype: str, count: int) -> np.ndarray:
    info = np.iinfo(dtype)
    one = st.one_of(st.sampled_from(edge_values(dtype)), st.integers(int(info.min), int(info.max)))
    return np.array(data.draw(st.lists(one, min_size=count, max_size=count)), dtype)


def _compare(source: str, target: str, arrays):
    with np.errstate(all="ignore"):
        expected = np.asarray(rx.interpret(module_of(source), "main", *arrays))
    got = np.asarray(built_main(source, target)(*arrays))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected, err_msg=str([a.tolist() for a in arrays]))


def sweep(ops, examples: int):
    """Parametrizes a test over every VM target, integer dtype and op of ``ops``, with ``examples``
    hypothesis draws (``data``) each."""
    def decorate(test):
        test = settings(max_examples=examples, deadline=None)(given(data=st.data())(test))
        test = pytest.mark.parametrize("name", ops)(test)
        test = pytest.mark.parametrize("dtype", INT_DTYPES)(test)
        return pytest.mark.parametrize("target", AVAILABLE_VM_TARGETS)(test)
    return decorate


@sweep(UNARY, examples=3)
def test_unary_ops_at_the_extremes(target, name, dtype, data):
    source = f'@R.function\ndef main(x: R.Tensor(("n",), "{dtype}")):\n    return R.{name}(x)\n'
    _compare(source, target, [np.concatenate([np.array(edge_values(dtype), dtype), values(data, dtype, 5)])])


@sweep(BINARY, examples=2)
def test_binary_ops_at_the_extremes(target, name, dtype, data):
    source = (f'@R.function\ndef main(x: R.Tensor(("n",), "{dtype}"), y: R.Tensor(("n",), "{dtype}")):\n'
              f'    return R.{name}(x, y)\n')
    edges = np.array(edge_values(dtype), dtype)
    x = np.concatenate([np.repeat(edges, len(edges)), values(data, dtype, 6)])
    y = np.concatenate([np.tile(edges, len(edges)), values(data, dtype, 6)])
    if name == "power":   # NumPy refuses negative exponents (test_integer_power.py)
        y = (y.astype(np.int64) % 70).astype(dtype) if np.iinfo(dtype).min < 0 else y % np.asarray(70, dtype)
    if name in DIVIDING:
        y = np.where(y == 0, np.asarray(1, dtype), y)
    _compare(source, target, [x, y])
