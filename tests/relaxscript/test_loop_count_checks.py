"""A kernel whose loop nest counts more points than int64 holds is refused before it runs.

s13 left it open: ``R.sum(R.ones((a, b)))`` fuses into one kernel that allocates nothing, so no
allocation check sees the (a, b) domain; at a = b = 2**32 the C kernel looped 2**64 times (it did
not finish). The VM now checks every loop nest count of every kernel where its symbolic values
get known (vm/codegen.py ``check_loop_counts``, ``tensorir.analysis.loop_counts``); a constant
count is refused at build time; direct kernel calls check the same counts.
"""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from backends.target import build_kernels
from relaxscript.vm.instructions import VMBuildError
from tensorir.analysis.loop_counts import loop_nest_counts
from tensorir.errors import ShapeMismatchError
from tests.targets import VM_TARGETS

FUSED_SUM = '''
@I.ir_module
class Module:
    @R.function
    def main(s: R.Shape(["a", "b"]), x: R.Tensor((2,), "float32")):
        a = T.int64()
        b = T.int64()
        with R.dataflow():
            y = R.add(x, x)
            ones = R.ones(R.shape([a, b]), "float32")
            total = R.sum(ones)
            z = R.add(y, total)
            R.output(z)
        return z
'''

WIDE = (2 ** 32, 2 ** 32)


@pytest.mark.parametrize("target", VM_TARGETS)
def test_a_fused_reduction_past_int64_is_refused_before_any_kernel(target):
    vm = rx.VirtualMachine(rx.build(rx.from_source(FUSED_SUM), target=target))
    x = np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(vm["main"]((3, 4), x), x + x + 12)
    np.testing.assert_array_equal(vm["main"]((0, 5), x), x + x)
    for a, b in (WIDE, (2 ** 62, 2), (3, 2 ** 62)):
        # where the build keeps the (a, b) ones as a buffer (C), its allocation check refuses the
        # call first; where everything fuses into one kernel, the loop-count check does
        with pytest.raises(ShapeMismatchError, match=r"function 'main'(: kernel '\w+' would have a \* b = "
                                                     rf"{a * b} iterations|, storage '\w+': cannot allocate)"
                                                     rf".*a = {a}.*b = {b}"):
            vm["main"]((a, b), x)


def test_the_reference_refuses_the_same_program():
    with pytest.raises(ShapeMismatchError, match="cannot allocate"):
        rx.interpret(rx.from_source(FUSED_SUM), "main", WIDE, np.zeros(2, np.float32))


BIG_LOOP = '''
@I.ir_module
class Module:
    @T.prim_func
    def count(y: T.Buffer((1,), "float32")):
        for i, j in T.grid(EXTENT, EXTENT):
            with T.block("count"):
                vi, vj = T.axis.remap("RR", [i, j])
                with T.init():
                    y[0] = T.float32(0)
                y[0] = y[0] + T.float32(1)

    @R.function
    def main(x: R.Tensor((1,), "float32")):
        y = R.call_tir(Module.count, [], R.Tensor((1,), "float32"))
        return y
'''


def test_a_constant_loop_nest_past_int64_is_refused_at_build():
    with pytest.raises(VMBuildError, match="kernel 'count' has more than 9223372036854775807 iterations"):
        rx.build(rx.from_source(BIG_LOOP.replace("EXTENT", str(2 ** 32))), target="c")
    rx.build(rx.from_source(BIG_LOOP.replace("EXTENT", str(2 ** 31))), target="interp")   # 2**62 fits


SCALAR_LOOPS = '''
@T.prim_func
def scalar_loops(y: T.Buffer((1,), "float32"), n: T.int64, m: T.int64):
    for i, j in T.grid(n, m):
        with T.block("count"):
            vi, vj = T.axis.remap("RR", [i, j])
            with T.init():
                y[0] = T.float32(0)
            y[0] = y[0] + T.float32(1)
'''


def test_a_direct_kernel_call_checks_its_counts_and_scalars():
    func = tir.from_source(SCALAR_LOOPS)
    kernel = build_kernels("c", func)[func.name]
    y = np.zeros(1, np.float32)
    kernel(y, n=3, m=5)
    assert y[0] == 15
    with pytest.raises(ShapeMismatchError, match=r"scalar_loops.*= 18446744073709551616 iterations, more than int64 counts"):
        kernel(y, n=2 ** 32, m=2 ** 32)
    # ctypes would pass 2**64 + 3 as 3
    with pytest.raises(ShapeMismatchError, match="scalar parameter 'n' = 18446744073709551619 is outside the int64"):
        kernel(y, n=2 ** 64 + 3, m=1)


def test_loop_nest_counts_take_each_innermost_nest_and_each_allocation():
    func = tir.from_source('''
@T.prim_func
def nests(a: T.Buffer(("n", 4), "float32"), b: T.Buffer(("n",), "float32"), m: T.int64):
    n = T.int64()
    t = T.alloc_buffer((n, m), "float64")
    for i in range(n):
        for j in range(i):          # reads an outer loop var: left out of the product
            b[i] = b[i] + a[j, 0]
        for k in range(m - 2):
            b[i] = b[i] + T.float32(1)
    for i, j in T.grid(n, m):
        t[i, j] = T.float64(0)
''')
    n, m = func.buffer_params[0].shape[0], func.scalar_params[0]
    counts = {str(c): what for c, what in loop_nest_counts(func.body, [n, m])}
    env = {"n": 5, "m": 1}
    values = {w: tir.arith.evaluate(c, {n: env["n"], m: env["m"]}) for c, w in loop_nest_counts(func.body, [n, m])}
    assert set(counts.values()) == {"iterations", "bytes of buffer 't'"}
    assert values["bytes of buffer 't'"] == 5 * 1 * 8
    # i alone (5), i times max(m - 2, 0) (0) and n * m (5): the largest iteration count is 5
    assert sorted(tir.arith.evaluate(c, {n: 5, m: 1}) for c, w in loop_nest_counts(func.body, [n, m])
                  if w == "iterations") == [0, 5, 5]
