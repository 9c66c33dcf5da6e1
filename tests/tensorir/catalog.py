"""Hand-written prim_funcs in script form, covering every construct of the parser.

Each entry is script text (parsed with ``tensorir.from_source``, never
executed). Entries with a ``reference`` also say what they compute:
``reference(*arrays, **scalars)`` takes the same NumPy arrays as
``tensorir.interpret`` (outputs written in place) and the values of the
scalar parameters, so interpreter and schedule tests can compare against it.
``sizes`` gives sample values of the symbolic shape vars (use
``make_arrays``) and ``scalars`` those of scalar parameters.

    from tests.tensorir.catalog import CATALOG, load
    func = load("matmul")
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import tensorir as tir


@dataclass
class Entry:
    name: str
    source: str
    reference: Callable | None = None
    sizes: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)

    @property
    def func(self) -> "tir.PrimFunc":
        return tir.from_source(self.source, filename=f"<catalog:{self.name}>")


CATALOG: dict[str, Entry] = {}


def _add(name: str, source: str, reference: Callable | None = None, scalars=None, **sizes) -> None:
    CATALOG[name] = Entry(name, source, reference, sizes, dict(scalars or {}))


def load(name: str) -> "tir.PrimFunc":
    return CATALOG[name].func


def make_arrays(func: "tir.PrimFunc", sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Random arrays for the buffer params of ``func`` at the given symbolic sizes."""
    arrays = []
    for buf in func.buffer_params:
        env = {v.name: val for v, val in _shape_vars(buf, sizes)}
        shape = [int(eval(compile(tir.script.format_expr(d), "<shape>", "eval"), {}, env))
                 for d in buf.shape]
        if buf.dtype.startswith("float"):
            arrays.append(rng.uniform(0.5, 2.0, size=shape).astype(buf.dtype))
        else:
            arrays.append(rng.integers(0, 5, size=shape).astype(buf.dtype))
    return arrays


def _shape_vars(buf, sizes):
    for v in tir.collect(buf, lambda n: isinstance(n, tir.Var)):
        yield v, sizes[v.name]


# ----------------------------------------------------------------------------- basics
def _ref_exp(x, y):
    y[...] = np.exp(x)


_add("exp", '''
# from tensorir import T
@T.prim_func
def exp(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = T.exp(x[vi, vj])
''', _ref_exp, n=3)


def _ref_matmul(a, b, c):
    c[...] = a @ b


_add("matmul", '''
from tensorir import T

@T.prim_func
def matmul(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 12), "float32"),
           C: T.Buffer((16, 12), "float32")):
    """C = A @ B with an explicit reduction block."""
    for i, j, k in T.grid(16, 12, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
''', _ref_matmul)

_add("matmul_dynamic", '''
@T.prim_func
def matmul_dynamic(A: T.Buffer(("n", "k"), "float32"), B: T.Buffer(("k", "m"), "float32"),
                   C: T.Buffer(("n", "m"), "float32")):
    n = T.int64(upper=4096)
    k = T.int64(multiple_of=8)
    m = T.int64()
    for i, j, r in T.grid(n, m, k):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            vj = T.axis.S(m, j)
            vr = T.axis.reduce(k, r)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] += A[vi, vr] * B[vr, vj]
''', _ref_matmul, n=5, k=8, m=3)

# Paper short form (Figure 3 style) and its explicit equivalent.
SHORT_FORM = '''
@T.prim_func
def mm_short(X: T.Buffer(("n", 4), "float32"), W: T.Buffer((4, 6), "float32"),
             Y: T.Buffer(("n", 6), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 6):
        with T.block():
            Y[i, j] = 0.0
    for i, j, k in T.grid(n, 6, 4):
        with T.block():
            Y[i, j] += X[i, k] * W[k, j]
'''
SHORT_FORM_EXPLICIT = '''
@T.prim_func
def mm_short(X: T.Buffer(("n", 4), "float32"), W: T.Buffer((4, 6), "float32"),
             Y: T.Buffer(("n", 6), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 6):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads()
            T.writes(Y[vi, vj])
            Y[vi, vj] = 0.0
    for i, j, k in T.grid(n, 6, 4):
        with T.block("Y_1"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(Y[vi, vj], X[vi, vk], W[vk, vj])
            T.writes(Y[vi, vj])
            Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vk, vj]
'''
_add("short_form", SHORT_FORM, _ref_matmul, n=3)


# ----------------------------------------------------------------------------- blocks
def _ref_softmax(x, y):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    y[...] = e / e.sum(axis=1, keepdims=True)


_add("softmax", '''
@T.prim_func
def softmax(x: T.Buffer(("n", 8), "float32"), y: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    row_max = T.alloc_buffer((n,), "float32")
    row_sum = T.alloc_buffer((n,), "float32")
    for i, k in T.grid(n, 8):
        with T.block("max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                row_max[vi] = T.float32("-inf")
            row_max[vi] = T.max(row_max[vi], x[vi, vk])
    for i, k in T.grid(n, 8):
        with T.block("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                row_sum[vi] = 0.0
            row_sum[vi] = row_sum[vi] + T.exp(x[vi, vk] - row_max[vi])
    for i, j in T.grid(n, 8):
        with T.block("norm"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = T.exp(x[vi, vj] - row_max[vi]) / row_sum[vi]
''', _ref_softmax, n=4)


def _ref_pad(a, b):
    b[...] = 0
    b[1:-1] = a


_add("axes_where_regions", '''
@T.prim_func
def pad(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n + 2",), "float32")):
    n = T.int64()
    for o, i in T.grid((n + 2 + 3) // 4, 4):
        with T.block("pad"):
            vb = T.axis.spatial(n + 2, o * 4 + i)
            T.where(o * 4 + i < n + 2)
            T.reads(A[0:n])
            T.writes(B[vb])
            B[vb] = T.if_then_else(1 <= vb and vb < n + 1, A[vb - 1], T.float32(0))
''', _ref_pad, n=6)


def _ref_window(a, b):
    for i in range(b.shape[0]):
        b[i] = a[i + 2] + a[i + 3] + a[i + 4]


_add("axis_ranges", '''
@T.prim_func
def window(A: T.Buffer((12,), "float32"), B: T.Buffer((6,), "float32")):
    for i in range(2, 8):
        with T.block("w"):
            vi = T.axis.S((2, 8), i)
            T.reads(A[vi:vi + 3])
            T.writes(B[vi - 2])
            B[vi - 2] = A[vi] + A[vi + 1] + A[vi + 2]
''', _ref_window)


def _ref_blocked(a, b):
    b[...] = a * 2.0


_add("alloc_scopes_match", '''
@T.prim_func
def blocked(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for io in range(2):
        with T.block("outer"):
            vo = T.axis.spatial(2, io)
            T.reads(A[vo * 4:vo * 4 + 4, 0:16])
            T.writes(B[vo * 4:vo * 4 + 4, 0:16])
            tile = T.alloc_buffer((4, 16), "float32", scope="shared")
            Asub = T.match_buffer(A[vo * 4:vo * 4 + 4, 0:16], (4, 16), "float32")
            for ii, j in T.grid(4, 16):
                with T.block("load"):
                    vi, vj = T.axis.remap("SS", [ii, j])
                    tile[vi, vj] = Asub[vi, vj]
            for ii, j in T.grid(4, 16):
                with T.block("store"):
                    vi, vj = T.axis.remap("SS", [ii, j])
                    acc = T.alloc_buffer((1,), "float32", scope="local")
                    acc[0] = tile[vi, vj] * 2.0
                    B[vo * 4 + vi, vj] = acc[0]
''', _ref_blocked)


def _ref_loops(a, b):
    b[...] = a + 1.0


_add("loop_kinds", '''
@T.prim_func
def loops(A: T.Buffer((4, 8, 2), "float32"), B: T.Buffer((4, 8, 2), "float32")):
    T.func_attr({"global_symbol": "loops", "tir.noalias": True, "tags": [1, 2.5, "x"]})
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(2, thread="threadIdx.x"):
            for j in T.parallel(8, annotations={"pragma": "auto"}):
                for k in T.vectorized(2):
                    for u in T.unroll(1):
                        for s in T.serial(0, 1):
                            with T.block("add"):
                                vi = T.axis.spatial(4, bx * 2 + tx + u + s)
                                vj, vk = T.axis.remap("SS", [j, k])
                                T.block_attr({"meta": 1})
                                B[vi, vj, vk] = A[vi, vj, vk] + 1.0
''', _ref_loops)


def _ref_reduce_nested(a, out):
    out[0] = a.sum()


_add("nested_reduction", '''
@T.prim_func
def total(A: T.Buffer(("n", 4), "float32"), out: T.Buffer((1,), "float32")):
    n = T.int64()
    for i in range(n):
        with T.block("rows"):
            vi = T.axis.reduce(n, i)
            T.reads(A[vi, 0:4], out[0])
            T.writes(out[0])
            with T.init():
                out[0] = 0.0
            for j in range(4):
                with T.block("cols"):
                    vj = T.axis.reduce(4, j)
                    out[0] = out[0] + A[vi, vj]
''', _ref_reduce_nested, n=3)


# ----------------------------------------------------------------------------- expressions
def _ref_exprs(a, idx, b, m, alpha):
    for i in range(a.shape[0]):
        x = a[i] * alpha
        q = (i * 7) // 3 + (i * 7) % 3 - int(np.ceil(i / 2)) + int(i / 2) + max(i, 1) - min(i, 2)
        if (i % 2 == 0 and i < m) or not (i > 3):
            b[i] = x + np.float32(q) if x > 0 else -x
        else:
            b[i] = np.float32(idx[i]) / np.float32(2)


_add("expressions", '''
@T.prim_func
def exprs(A: T.Buffer(("n",), "float32"), idx: T.Buffer(("n",), "int32"),
          B: T.Buffer(("n",), "float32"), m: T.int64, alpha: T.float32):
    n = T.int64()
    for i in range(n):
        x = A[i] * alpha
        q = T.floordiv(i * 7, 3) + T.floormod(i * 7, 3) - T.ceildiv(i, 2) + T.truncdiv(i, 2) \\
            + T.max(i, 1) - T.min(i, 2)
        if (i % 2 == 0 and i < m) or not i > 3:
            B[i] = T.Select(x > T.float32(0), x + T.cast(q, "float32"), -x)
        else:
            B[i] = T.Cast("float32", idx[i]) / 2.0
''', _ref_exprs, scalars={"m": 4, "alpha": 1.5}, n=7)

_add("intrinsics", '''
@T.prim_func
def intrinsics(A: T.Buffer((4,), "float32"), B: T.Buffer((4, 16), "float32"),
               C: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("math"):
            vi = T.axis.spatial(4, i)
            B[vi, 0] = T.exp(A[vi]) + T.log(A[vi]) + T.sqrt(A[vi]) + T.rsqrt(A[vi])
            B[vi, 1] = T.tanh(A[vi]) + T.sigmoid(A[vi]) + T.erf(A[vi])
            B[vi, 2] = T.pow(A[vi], 2.0) + T.abs(A[vi]) + abs(A[vi])
            B[vi, 3] = T.sin(A[vi]) + T.cos(A[vi]) + T.tan(A[vi])
            B[vi, 4] = T.floor(A[vi]) + T.ceil(A[vi]) + T.round(A[vi])
            B[vi, 5] = T.exp2(A[vi]) + T.log2(A[vi])
            B[vi, 6] = T.if_then_else(T.isnan(A[vi]) or T.isinf(A[vi]), 0.0, A[vi])
            B[vi, 7] = max(A[vi], 1.0) + min(A[vi], -1.5, 2.0) + A[vi] ** 2.0
            B[vi, 8] = T.exp(T.Cast("float32", C[vi]))
            B[vi, 9] = T.call_extern("float32", "my_extern", A[vi], 3)
            C[vi] = T.abs(C[vi]) - -C[vi] + T.int32(7) * C[vi] // 2 % 5
''')

_add("typed_literals", '''
@T.prim_func
def typed(A: T.Buffer((4,), "float16"), B: T.Buffer((4,), "float16"), F: T.Buffer((4,), "bool"),
          I: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("typed"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi] * T.float16(1.5) + T.float16(0.25) + T.float16(2)
            F[vi] = T.bool(True) and A[vi] > 0.5 and 0 < vi < 3
            I[vi] = T.int32(3) + T.int32(-4) * T.Cast("int32", vi) + T.int64(5)
''')

_add("lowered", '''
@T.prim_func
def lowered(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32")):
    n = T.int64(lower=1, upper=1024)
    for i in T.parallel(n):
        with T.decl_buffer((2,), "float32", scope="local") as tmp:
            tmp[0] = A[i]
            with T.LetStmt(tmp[0] * 2.0) as two_x:
                tmp[1] = two_x
            B[i] = tmp[0] + tmp[1]
        T.evaluate(0)
    t = T.decl_buffer((1,), "float32")
    t[0] = 1.0
    T.evaluate(T.call_extern("int32", "noop", t[0]))
''')

_add("signature_forms", '''
@T.prim_func
def sig(A: T.Buffer(("n", "m"), "float32", strides=("m", 1), elem_offset="off"),
        B: T.Buffer(("n * m",), "float32", scope="global"), C: T.Buffer([], "float32"),
        k: T.int32, D: T.Buffer(("k",), "int32")):
    n = T.int64()
    m = T.int64()
    off = T.int64(lower=None)
    k = T.int32(lower=0, upper=64)
    for i, j in T.grid(n, m):
        B[i * m + j] = A[i, j] + C[()]
    for t in range(k):
        D[t] = t
''')

_add("zero_dim_and_if", '''
@T.prim_func
def zd(A: T.Buffer((), "float32"), B: T.Buffer((3,), "float32")):
    for i in range(3):
        with T.block("b"):
            vi = T.axis.spatial(3, i)
            if vi == 0:
                B[vi] = A[()]
            elif vi == 1:
                B[vi] = -A[()]
            else:
                B[vi] = A[()] * T.float32(vi)
''')

_add("explicit_root", '''
@T.prim_func
def explicit_root(A: T.Buffer((4,), "float32")):
    with T.block("root"):
        T.reads()
        T.writes()
        for i in range(4):
            A[i] = 1.0
''')


def all_funcs() -> dict[str, "tir.PrimFunc"]:
    return {name: entry.func for name, entry in CATALOG.items()}
