"""An integer division by zero in a compiled kernel is a Python exception, never SIGFPE.

C traps on ``x / 0`` for integers and kills the process; the emitter tests every divisor it cannot
prove nonzero, and the kernel reports ``STATUS_ZERO_DIVISION`` (backends/c/status.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import KernelDivisionByZeroError
from tensorir.interpreter.errors import InterpretError

DIVIDE_BY_DATA = '''
@T.prim_func
def divide(a: T.Buffer(("n",), "int32"), b: T.Buffer(("n",), "int32"), c: T.Buffer(("n",), "int32"),
           d: T.Buffer(("n",), "int32"), e: T.Buffer(("n",), "int32")):
    n = T.int64()
    for i in range(n):
        c[i] = a[i] // b[i]
        d[i] = a[i] % b[i]
        e[i] = T.truncdiv(a[i], b[i])
'''

DIVIDE_BY_SCALAR = '''
@T.prim_func
def divide_scalar(a: T.Buffer(("n",), "int64"), b: T.Buffer(("n",), "int64"), m: T.int64):
    n = T.int64()
    for i in range(n):
        b[i] = a[i] // m
'''


def _outputs(n):
    return [np.zeros(n, "int32") for _ in range(3)]


def test_nonzero_divisors_compute_what_the_interpreter_computes():
    func = tir.from_source(DIVIDE_BY_DATA)
    kernel = build_kernels("c", func)[func.name]
    a = np.array([7, -7, 7, -7, 0], "int32")
    b = np.array([2, 2, -2, -2, 3], "int32")
    want, got = _outputs(5), _outputs(5)
    tir.interpret(func, a, b, *want)
    kernel(a, b, *got)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_a_zero_divisor_in_the_data_raises_instead_of_trapping():
    func = tir.from_source(DIVIDE_BY_DATA)
    kernel = build_kernels("c", func)[func.name]
    a = np.array([7, 8, 9], "int32")
    b = np.array([2, 0, 3], "int32")
    with pytest.raises(KernelDivisionByZeroError, match="integer division by zero"):
        kernel(a, b, *_outputs(3))


def test_a_zero_scalar_divisor_raises_and_a_known_positive_one_is_not_tested():
    func = tir.from_source(DIVIDE_BY_SCALAR)
    kernel = build_kernels("c", func)[func.name]
    a = np.arange(4, dtype="int64")
    out = np.zeros(4, "int64")
    kernel(a, out, m=3)
    np.testing.assert_array_equal(out, a // 3)
    with pytest.raises(KernelDivisionByZeroError):
        kernel(a, out, m=0)
    constant = tir.from_source(DIVIDE_BY_SCALAR.replace("a[i] // m", "a[i] // 4"))
    assert "rs_divided_by_zero(&rs_status)" not in build_kernels("c", constant).source
    assert "rs_divided_by_zero(&rs_status)" in build_kernels("c", func).source


@pytest.mark.parametrize("target", ["c", "interp"])
def test_graph_level_integer_division_by_zero_is_a_python_error(target):
    source = '''
@R.function
def main(x: R.Tensor(("n",), "int32"), y: R.Tensor(("n",), "int32")) -> R.Tensor(("n",), "int32"):
    n = T.int64()
    with R.dataflow():
        lv = R.floor_divide(x, y)
        R.output(lv)
    return lv
'''
    vm = rx.VirtualMachine(rx.build(rx.from_source(source), target=target))
    x = np.array([5, -5, 6], "int32")
    np.testing.assert_array_equal(vm["main"](x, np.array([2, 2, -4], "int32")), x // np.array([2, 2, -4]))
    with pytest.raises((KernelDivisionByZeroError, InterpretError)):
        vm["main"](x, np.array([2, 0, 1], "int32"))


# Found by the branching-kernel generator: `0 // n1` under a branch that never runs was computed
# before the loops (a hoisted invariant float value) and reported a division by zero for n1 = 0.
NEVER_TAKEN = '''
@T.prim_func
def never_taken(X: T.Buffer((2, "n1"), "float32"), out: T.Buffer((2, "n1"), "float32")):
    n1 = T.int64()
    for i0, i1 in T.grid(2, n1):
        with T.block("cond"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            if v0 < 1:
                out[v0, v1] = T.Cast("float32", 7 // n1)
'''


@pytest.mark.parametrize("n", [0, 3])
def test_a_division_in_a_branch_is_not_computed_ahead_of_the_branch(n):
    func = tir.from_source(NEVER_TAKEN)
    kernel = build_kernels("c", func)[func.name]
    x = np.zeros((2, n), "float32")
    want, got = np.zeros((2, n), "float32"), np.zeros((2, n), "float32")
    tir.interpret(func, x, want)
    kernel(x, got)
    np.testing.assert_array_equal(got, want)
