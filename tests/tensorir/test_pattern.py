"""Pattern kinds (paper Algorithm 1) read from loads and stores, never from op names."""
import pytest

import tensorir as tir
from tensorir.analysis import PatternKind, analyze_pattern

HEADER = "from tensorir import T\n"

CASES = {
    "elementwise": ("""
@T.prim_func
def f(A: T.Buffer(("n", 4), "float32"), B: T.Buffer(("n", 4), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * B[vi, vj] + T.float32(1)
""", PatternKind.ElementWise),
    "elementwise_with_broadcast_operand": ("""
@T.prim_func
def f(A: T.Buffer(("n", 4), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vj]
""", PatternKind.ElementWise),
    "broadcast": ("""
@T.prim_func
def f(B: T.Buffer((4,), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj]
""", PatternKind.Broadcast),
    "transpose": ("""
@T.prim_func
def f(A: T.Buffer((4, "n"), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vj, vi]
""", PatternKind.Injective),
    "reshape_index_arithmetic": ("""
@T.prim_func
def f(A: T.Buffer(("n * 4",), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi * 4 + vj]
""", PatternKind.Injective),
    "row_sum": ("""
@T.prim_func
def f(A: T.Buffer(("n", 4), "float32"), C: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i, k in T.grid(n, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
""", PatternKind.Reduction),
    "sum_of_squares_is_not_matmul": ("""
@T.prim_func
def f(A: T.Buffer(("n", 4), "float32"), C: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i, k in T.grid(n, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk] * A[vi, vk]
""", PatternKind.Reduction),
    "matmul": ("""
@T.prim_func
def f(A: T.Buffer(("n", 8), "float32"), B: T.Buffer((8, 4), "float32"), C: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j, k in T.grid(n, 4, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""", PatternKind.OutputWiseFusible),
    "two_stores_in_one_block": ("""
@T.prim_func
def f(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32"), C: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi]
            C[vi] = A[vi]
""", PatternKind.Opaque),
    "lowered_loops_without_blocks": ("""
@T.prim_func
def f(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        C[i] = A[i]
""", PatternKind.Opaque),
    # paper Figure 9: a hand-written 4-bit decode (no op name tells what it is)
    "decode_q4": ("""
@T.prim_func
def f(W: T.Buffer((8, 2), "uint32"), S: T.Buffer((8,), "float32"), D: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(8, 16):
        with T.block("decode"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.Cast("float32", T.Cast("int32", (W[vi, vj // 8] // T.uint32(1) ) % T.uint32(16)) - 7) * S[vi]
""", PatternKind.Injective),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pattern_kind(name):
    source, expected = CASES[name]
    assert analyze_pattern(tir.from_source(HEADER + source)) == expected


def test_multi_block_function_takes_the_most_general_kind():
    from tensorir.compute import compute, create_prim_func, placeholder, reduce_axis, reduce_max
    n = tir.size_var("n")
    x = placeholder((n, 16), "float32", "x")
    k = reduce_axis(16, "k")
    row_max = compute((n,), lambda i: reduce_max(x[i, k], [k]), "row_max")
    shifted = compute((n, 16), lambda i, j: x[i, j] - row_max[i], "shifted")
    func = create_prim_func([x, shifted])
    assert analyze_pattern(func) == PatternKind.Reduction
