"""T-level forms the s11 sweep of public TVMScript found missing or mis-printed (see
docs/ARCHITECTURE.md, "s11-tvmcorpus"): a block's view of its own allocation in the inferred
regions, ``T.sblock_alloc_buffer``, ``T.thread_binding(n, "threadIdx.x")``, ``T.meta_var``,
``T.assume``, bare ``T.call_extern`` statements, ``T.Bind``, ``T.decl_buffer(data=...)`` over
``T.allocate`` storage, ``T.match_buffer(region)`` without a shape. Our own sources: each
parses, round-trips, and (where it computes) runs in the interpreter and the C build equal to
NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import ParseError


def _round_trip(func):
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    assert again.script() == text
    return text


def _runs(func, make_args, check):
    """The interpreter and the C kernel both give what ``check`` expects."""
    kernel = build_kernels("c", func)[func.name]
    for run in (lambda *a: tir.interpret(func, *a), kernel):
        args = make_args()
        run(*args)
        check(*args)


# ---------------------------------------------------------------- regions of own allocations
OWN_VIEW = '''
@T.prim_func
def main(A: T.Buffer((8, 6), "float32"), B: T.Buffer((8, 6), "float32")):
    for i in range(8):
        with T.block():
            vi = T.axis.S(8, i)
            C = T.alloc_buffer((8, 6), "float32")
            C0 = T.match_buffer(C[vi, 0:6], (6,))
            for j in range(6):
                with T.block():
                    jj = T.axis.S(6, j)
                    C1 = T.match_buffer(C0[jj], ())
                    C1[()] = A[vi, jj] * T.float32(2)
            for j in range(6):
                with T.block():
                    jj = T.axis.S(6, j)
                    B[vi, jj] = C[vi, jj] + T.float32(1)
'''


def test_a_view_of_the_blocks_own_allocation_is_not_in_its_regions():
    """The inferred T.writes of the outer block named C (allocated inside it), so the print
    read C before its allocation and did not parse back."""
    func = tir.from_source(OWN_VIEW)
    text = _round_trip(func)
    outer = text[text.index("with T.block("):text.index("C = T.alloc_buffer")]
    assert "C[" not in outer and "T.reads(A[vi, 0:6])" in outer
    a = np.random.default_rng(0).standard_normal((8, 6)).astype("float32")

    def check(_a, b):
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    _runs(func, lambda: (a.copy(), np.zeros((8, 6), "float32")), check)


# ---------------------------------------------------------------- spellings
def test_sblock_alloc_buffer_is_alloc_buffer():
    src = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.sblock_alloc_buffer((4, 4), dtype="float32")
    for i, j in T.grid(4, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 4):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''
    func = tir.from_source(src)
    plain = tir.from_source(src.replace("T.sblock_alloc_buffer", "T.alloc_buffer"))
    tir.assert_structural_equal(func, plain)
    _round_trip(func)
    a = np.arange(16, dtype="float32").reshape(4, 4)

    def check(_a, c):
        np.testing.assert_array_equal(c, a * 2 + 1)
    _runs(func, lambda: (a.copy(), np.zeros((4, 4), "float32")), check)


THREADS = '''
@T.prim_func
def main(A: T.Buffer((4, 8), "float32")):
    for i in T.thread_binding(4, "blockIdx.x"):
        for j in T.thread_binding(0, 8, "threadIdx.x"):
            A[i, j] = A[i, j] * T.float32(2)
'''


def test_thread_binding_takes_its_axis_positionally():
    func = tir.from_source(THREADS)
    keyword = tir.from_source(THREADS.replace('(4, "blockIdx.x")', '(4, thread="blockIdx.x")')
                              .replace('(0, 8, "threadIdx.x")', '(0, 8, thread="threadIdx.x")'))
    tir.assert_structural_equal(func, keyword)
    _round_trip(func)
    with pytest.raises(ParseError, match="names its thread axis twice") as err:
        tir.from_source(THREADS.replace('(4, "blockIdx.x")', '(4, "blockIdx.x", thread="vthread")'))
    assert err.value.lineno == 4


def test_meta_var_is_its_value_where_used():
    src = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    x = T.meta_var(3)
    y = T.meta_var(T.float32(0.5))
    for i in range(4):
        A[i] = T.cast(x + i, "float32") * y
'''
    func = tir.from_source(src)
    spelled = tir.from_source(src.replace("    x = T.meta_var(3)\n", "").replace(
        "    y = T.meta_var(T.float32(0.5))\n", "").replace("T.cast(x + i", "T.cast(3 + i")
        .replace(") * y", ") * T.float32(0.5)"))
    tir.assert_structural_equal(func, spelled)
    _round_trip(func)

    def check(a):
        np.testing.assert_array_equal(a, (np.arange(4) + 3) * 0.5)
    _runs(func, lambda: (np.zeros(4, "float32"),), check)


ASSUME = '''
@T.prim_func
def main(A: T.Buffer((4,), "int32")):
    T.evaluate(T.assume(A[0] == 5))
    T.assume(A[1] < A[0])
    for i in range(4):
        A[i] = A[i] + 10
'''


def test_assume_is_checked_and_dropped():
    """T.assume is a hint to TVM's simplifier; it changes nothing the function computes."""
    func = tir.from_source(ASSUME)
    without = tir.from_source(ASSUME.replace("    T.evaluate(T.assume(A[0] == 5))\n", "")
                              .replace("    T.assume(A[1] < A[0])\n", ""))
    tir.assert_structural_equal(func, without)
    _round_trip(func)
    with pytest.raises(ParseError, match="T.assume takes a boolean condition") as err:
        tir.from_source(ASSUME.replace("A[1] < A[0]", "A[1] + A[0]"))
    assert err.value.lineno == 5

    def check(a):
        np.testing.assert_array_equal(a, [15, 14, 13, 12])
    _runs(func, lambda: (np.array([5, 4, 3, 2], "int32"),), check)


def test_bare_call_extern_statement_is_evaluated():
    src = '''
@T.prim_func
def main(A: T.Buffer((1,), "int32")):
    T.call_extern("extern_func", A.data, dtype="int32")
'''
    func = tir.from_source(src)
    explicit = tir.from_source(src.replace('T.call_extern("extern_func", A.data, dtype="int32")',
                                           'T.evaluate(T.call_extern("extern_func", A.data, dtype="int32"))'))
    tir.assert_structural_equal(func, explicit)
    _round_trip(func)
    # a pure expression as a statement still means nothing, and stays an error
    with pytest.raises(ParseError, match="has no effect"):
        tir.from_source(src.replace('T.call_extern("extern_func", A.data, dtype="int32")',
                                    "T.exp(T.float32(1))"))


BIND = '''
@T.prim_func
def main(A: T.Buffer((6,), "int32"), k: T.int32):
    j = T.int32()
    T.Bind(k * 2, var=j)
    for i in range(6):
        A[i] = A[i] + j
'''


def test_bind_is_a_let_of_the_declared_variable():
    func = tir.from_source(BIND)
    implicit = tir.from_source(BIND.replace("    j = T.int32()\n    T.Bind(k * 2, var=j)\n",
                                            "    j = k * 2\n"))
    tir.assert_structural_equal(func, implicit)
    _round_trip(func)
    kernel = build_kernels("c", func)[func.name]
    for run in (lambda a, k: tir.interpret(func, a, k=k), lambda a, k: kernel(a, k=k)):
        for k in (0, 3, -4):
            a = np.arange(6, dtype="int32")
            run(a, k)
            np.testing.assert_array_equal(a, np.arange(6) + 2 * k)
    with pytest.raises(ParseError, match="binds a declared variable") as err:
        tir.from_source(BIND.replace("var=j", "var=q"))
    assert err.value.lineno == 5
    with pytest.raises(ParseError, match="'j' is int32 but the value is float32"):
        tir.from_source(BIND.replace("k * 2", "T.float32(1.5)"))


# ---------------------------------------------------------------- buffers
STRIDED_VIEW = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i0 in T.serial(4):
        B_data = T.allocate([4, 17], "float32", "global")
        B = T.decl_buffer(shape=[4, 16], dtype="float32", strides=[17, 1], data=B_data)
        for i1, j in T.grid(4, 16):
            B[i1, j] = A[i0 * 4 + i1, j] + T.float32(1)
        for i1, j in T.grid(4, 16):
            C[i0 * 4 + i1, j] = B[i1, j] * T.float32(2)
'''


def test_decl_buffer_over_allocated_storage_is_a_strided_view():
    func = tir.from_source(STRIDED_VIEW)
    text = _round_trip(func)
    assert "strides=" in text
    a = np.random.default_rng(1).standard_normal((16, 16)).astype("float32")

    def check(_a, c):
        np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    _runs(func, lambda: (a.copy(), np.zeros((16, 16), "float32")), check)
    with pytest.raises(ParseError, match="data= takes the storage of a buffer") as err:
        tir.from_source(STRIDED_VIEW.replace("data=B_data", "data=i0"))
    assert err.value.lineno == 6


def test_match_buffer_of_a_region_takes_its_extents_and_dtype():
    src = '''
@T.prim_func
def main(A: T.Buffer((16, 64), "int32")):
    with T.block():
        B = T.match_buffer(A[8:16, 32:64], shape=(8, 32), dtype="int32")
        for i, j in T.grid(8, 32):
            B[i, j] = i * 100 + j
'''
    func = tir.from_source(src)
    implicit = tir.from_source(src.replace(", shape=(8, 32), dtype=\"int32\")", ")"))
    tir.assert_structural_equal(func, implicit)
    _round_trip(implicit)

    def check(a):
        want = np.zeros((16, 64), "int32")
        want[8:16, 32:64] = np.arange(8)[:, None] * 100 + np.arange(32)[None, :]
        np.testing.assert_array_equal(a, want)
    _runs(implicit, lambda: (np.zeros((16, 64), "int32"),), check)
