"""TensorIR modules written the way TVM's documentation and printer write them
(``T.handle`` parameters matched by ``T.match_buffer``, ``T.func_attr`` with
``tir.noalias``, thread launches, ``T.allocate`` ...), each with a NumPy reference.

An entry: ``source`` (a prim_func, imports changed only), ``constructs`` (the
issue-15 constructs it uses), ``inputs(rng, size)`` -> arrays in parameter
order (outputs zeroed), ``reference(*arrays)`` -> {output index: expected},
and ``c`` (whether the C target builds it: a symbolic stride or an opaque
handle is something only the interpreter takes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class CorpusEntry:
    name: str
    source: str
    constructs: tuple
    inputs: Callable
    reference: Callable
    c: bool = True
    sized: bool = True  # False: static shapes, ``size`` is ignored


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


CORPUS = [
    CorpusEntry(
        "handle_elementwise", '''
@T.prim_func
def relu_plus_one(a: T.handle, b: T.handle) -> None:
    T.func_attr({"global_symbol": "relu_plus_one", "tir.noalias": T.bool(True)})
    n, m = T.int64(), T.int64()
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for i, j in T.grid(*A.shape):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            x: T.float32 = A[vi, vj]
            B[vi, vj] = T.if_then_else(cond=x > T.float32(0), t=x + T.float32(1), f=T.float32(0))
''', ("T.handle + T.match_buffer", "symbolic shape bound by the match", "tuple declaration",
      "-> None", "T.func_attr tir.noalias", "T.grid(*buf.shape)", "T.axis.remap",
      "annotated assignment", "keyword arguments to intrinsics"),
        lambda rng, n: [_f32(rng, n, 3), np.zeros((n, 3), "float32")],
        lambda a, b: {1: np.where(a > 0, a + 1, 0).astype("float32")}),

    CorpusEntry(
        "handle_matmul", '''
@T.prim_func
def matmul(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
    A = T.match_buffer(a, [16, 8], dtype="float32", offset_factor=1)
    B = T.match_buffer(b, [8, 4], dtype="float32", buffer_type="default")
    C = T.match_buffer(c, [16, 4], dtype="float32")
    for i, j, k in T.grid(16, 4, 8):
        with T.block("update"):
            vi = T.axis.spatial(16, i)
            vj = T.axis.S(4, j)
            vk = T.axis.reduce(8, k)
            T.reads([A[vi, vk], B[vk, vj]])
            T.writes([C[vi, vj]])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
''', ("T.handle + T.match_buffer", "match_buffer list shape and dtype=", "T.axis.spatial/reduce",
      "T.func_attr tir.noalias"),
        lambda rng, n: [_f32(rng, 16, 8), _f32(rng, 8, 4), np.zeros((16, 4), "float32")],
        lambda a, b, c: {2: a @ b}, sized=False),

    CorpusEntry(
        "strided_match", '''
@T.prim_func
def scale_rows(a: T.handle, b: T.handle, scale: T.float32):
    n = T.int64()
    s0 = T.int64()
    off = T.int64()
    A = T.match_buffer(a, (n, 4), "float32", strides=(s0, 1), elem_offset=off)
    B = T.match_buffer(b, (n, 4), "float32", strides=("s1", 1))
    for i in range(n):
        for j in T.vectorized(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * scale
''', ("T.match_buffer strides/elem_offset", "symbolic shape bound by the match"),
        lambda rng, n: [_f32(rng, n, 4), np.zeros((n, 4), "float32"), 1.5],
        lambda a, b, s: {1: a * np.float32(s)}, c=False),

    CorpusEntry(
        "opaque_handle", '''
@T.prim_func
def fill(a: T.handle, workspace: T.handle):
    n = T.var("int64")
    A = T.match_buffer(a, (n,), "float32")
    for i in T.serial(n):
        with T.block("fill"):
            vi = T.axis.spatial(n, i)
            A[vi] = T.Cast("float32", vi)
''', ("opaque T.handle parameter", "T.var declaration", "T.handle + T.match_buffer"),
        lambda rng, n: [np.zeros((n,), "float32"), None],
        lambda a, w: {0: np.arange(a.shape[0], dtype="float32")}, c=False),

    CorpusEntry(
        "thread_launch", '''
@T.prim_func
def double(a: T.handle, b: T.handle):
    T.func_attr({"global_symbol": "double", "tir.noalias": True})
    A = T.match_buffer(a, (32,), "float32")
    B = T.match_buffer(b, (32,), "float32")
    tx = T.env_thread("threadIdx.x")
    bx = T.launch_thread("blockIdx.x", 8)
    T.launch_thread(tx, 4)
    B[bx * 4 + tx] = A[bx * 4 + tx] * T.float32(2)
''', ("T.launch_thread", "T.env_thread", "T.handle + T.match_buffer"),
        lambda rng, n: [_f32(rng, 32), np.zeros((32,), "float32")],
        lambda a, b: {1: a * 2}, sized=False),

    CorpusEntry(
        "allocate_and_lets", '''
@T.prim_func
def smooth(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        buf = T.allocate([2], "float32", "local")
        tmp = T.Buffer((2,), data=buf, scope="local")
        tmp[0] = A[i]
        with T.LetStmt(tmp[0] + T.float32(1)) as x:
            tmp[1] = T.Let(y * T.float32(2), where={y: x})
        with T.decl_buffer((1,), "float32", scope="local") as acc:
            acc[0] = tmp[1] - T.float32(3)
            B[i] = T.max(a=acc[0], b=T.float32(0))
''', ("T.allocate", "T.decl_buffer", "T.Let", "T.LetStmt", "keyword arguments to intrinsics"),
        lambda rng, n: [_f32(rng, 8), np.zeros((8,), "float32")],
        lambda a, b: {1: np.maximum((a + 1) * 2 - 3, 0).astype("float32")}, sized=False),

    CorpusEntry(
        "block_launch", '''
@T.prim_func
def add_bias(a: T.handle, b: T.handle, c: T.handle):
    m = T.int64(is_size_var=True)
    A = T.match_buffer(a, (m, 16), "float32")
    Bias = T.match_buffer(b, (16,), "float32")
    C = T.match_buffer(c, (m, 16), "float32")
    with T.launch_thread("threadIdx.x", 16) as tx:
        for i in range(m):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, tx])
                C[vi, vj] = A[vi, vj] + Bias[vj]
''', ("T.launch_thread", "T.handle + T.match_buffer", "symbolic shape bound by the match"),
        lambda rng, n: [_f32(rng, n, 16), _f32(rng, 16), np.zeros((n, 16), "float32")],
        lambda a, bias, c: {2: a + bias}),

    CorpusEntry(
        "scan_and_opaque_axes", '''
@T.prim_func
def cumsum_twice(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("scan"):
            vi = T.axis.scan(n, i)
            T.reads(A[vi], B[vi - 1])
            T.writes(B[vi])
            if vi == 0:
                B[vi] = A[vi]
            else:
                B[vi] = B[vi - 1] + A[vi]
    for i in range(n):
        with T.block("twice"):
            vi = T.axis.opaque(n, i)
            B[vi] = B[vi] * T.float32(2)
''', ("T.axis.scan", "T.axis.opaque", "T.handle + T.match_buffer"),
        lambda rng, n: [_f32(rng, n), np.zeros((n,), "float32")],
        lambda a, b: {1: np.cumsum(a, dtype="float32") * 2}),
]

# Parsed, printed and round-tripped only: they call extern functions, which neither the
# interpreter nor the C target has (each raises a clear error naming the call).
EXTERN_SOURCES = {
    "pointers_to_extern": '''
@T.prim_func
def copy_rows(a: T.handle, B: T.Buffer((4, 4), "float32"), n: T.int32):
    A = T.match_buffer(a, (16,), "float32")
    T.evaluate(T.call_extern("int32", "my_copy", A.access_ptr("r"), B.access_ptr("w", offset=5),
                             T.address_of(A[n]), n))
''',
}
