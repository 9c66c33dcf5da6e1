"""The interpreter on hand-built functions: one test per IR construct.

Every function runs on both the vectorised and the scalar path.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from tensorir import (INTRINSICS, Allocate, Block, BlockRealize, Buffer, BufferRegion,
                      BufferStore, Cast, Evaluate, FloatImm, For, IfThenElse, IntImm, IterVar, LetStmt,
                      MatchBufferRegion, PrimFunc, Range, Select, Var, call_intrin, ceildiv, interpret,
                      seq, size_var)
from tensorir import expr as E
from tensorir.expr import INTEGER_INTRINSICS
from tests.tensorir.generators import point_region, root_realize

both_paths = pytest.mark.parametrize("vectorize", [True, False], ids=["vector", "scalar"])


def func(params, body, allocs=(), name="f"):
    return PrimFunc(params, root_realize(body, allocs), name=name)


def loops(pairs, body, kind="serial"):
    """Nest ``For`` loops over (var, extent) pairs, outermost first."""
    for var, extent in reversed(pairs):
        body = For(var, 0, extent, kind, body, thread_tag="threadIdx.x" if kind == "thread_binding" else None)
    return body


@both_paths
@pytest.mark.parametrize("kind", ["serial", "parallel", "vectorized", "unrolled", "thread_binding"])
def test_every_loop_kind_runs_as_serial(kind, vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n])
    i = Var("i")
    f = PrimFunc([x, y], loops([(i, n)], BufferStore(y, x[i] * 2.0, [i]), kind))
    a = np.arange(7, dtype=np.float32)
    out = np.zeros_like(a)
    interpret(f, a, out, vectorize=vectorize)
    np.testing.assert_array_equal(out, a * 2)


@both_paths
def test_split_with_predicate_and_thread_binding(vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n])
    bx, tx, v = Var("bx"), Var("tx"), Var("v")
    block = Block("b", [IterVar(v, Range(0, n), "S")], [point_region(x, [v])], [point_region(y, [v])],
                  BufferStore(y, x[v] + 1.0, [v]))
    realize = BlockRealize([bx * 4 + tx], E.LT(bx * 4 + tx, n), block)
    body = For(bx, 0, ceildiv(n, 4), "thread_binding",
               For(tx, 0, 4, "thread_binding", realize, thread_tag="threadIdx.x"), thread_tag="blockIdx.x")
    a = np.arange(10, dtype=np.float32)
    out = np.zeros_like(a)
    interpret(func([x, y], body), a, out, vectorize=vectorize)
    np.testing.assert_array_equal(out, a + 1)


@both_paths
def test_lowered_flattened_matmul_without_blocks(vectorize):
    # Params keep their 2-D shapes; the body uses 1-D views of their storage.
    m, n, k = size_var("m"), size_var("n"), size_var("k")
    a, b, c = Buffer("A", [m, k]), Buffer("B", [k, n]), Buffer("C", [m, n])
    a1, b1, c1 = Buffer("A1", [m * k], data=a), Buffer("B1", [k * n], data=b), Buffer("C1", [m * n], data=c)
    i, j, r = Var("i"), Var("j"), Var("r")
    out_index = i * n + j
    init = IfThenElse(E.EQ(r, 0), BufferStore(c1, 0.0, [out_index]))
    update = BufferStore(c1, c1[out_index] + a1[i * k + r] * b1[r * n + j], [out_index])
    f = PrimFunc([a, b, c], loops([(i, m), (j, n), (r, k)], seq(init, update)))
    rng = np.random.default_rng(0)
    av, bv = rng.standard_normal((5, 3)).astype("float32"), rng.standard_normal((3, 4)).astype("float32")
    cv = np.full((5, 4), 7.0, np.float32)
    interpret(f, av, bv, cv, vectorize=vectorize)
    np.testing.assert_allclose(cv, av @ bv, rtol=1e-5, atol=1e-6)


@both_paths
def test_lowered_reduction_loop_recognised_without_init(vectorize):
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("x", [n, m], "float64"), Buffer("y", [n], "float64")
    i, j = Var("i"), Var("j")
    body = loops([(i, n), (j, m)], BufferStore(y, y[i] + x[i, j], [i]))
    xv = np.arange(12, dtype=np.float64).reshape(3, 4)
    yv = np.ones(3)
    interpret(PrimFunc([x, y], body), xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, 1 + xv.sum(axis=1))


@both_paths
def test_param_with_symbolic_strides_and_1d_view_with_elem_offset(vectorize):
    n, s0 = size_var("n"), size_var("s0")
    x = Buffer("x", [n, 3], strides=[s0, 1])
    row1 = Buffer("row1", [3], elem_offset=3, data=x)  # row 1 of x through the flat storage
    y = Buffer("y", [3])
    j = Var("j")
    f = PrimFunc([x, y], loops([(j, 3)], BufferStore(y, row1[j] * 10.0, [j])))
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    yv = np.zeros(3, np.float32)
    interpret(f, xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, xv[1] * 10)


@both_paths
def test_match_buffer_views_a_strided_region(vectorize):
    n = size_var("n")
    x = Buffer("x", [n, 8])
    i, vi, j = Var("i"), Var("vi"), Var("j")
    stride, offset = Var("s"), Var("off")
    sub = Buffer("sub", [4], strides=[stride], elem_offset=offset)
    # Each block instance doubles x[vi, 2:6] through the view ``sub``.
    body = For(j, 0, 4, "serial", BufferStore(sub, sub[j] * 2.0, [j]))
    region = BufferRegion(x, [Range(vi, 1), Range(2, 4)])
    block = Block("scale", [IterVar(vi, Range(0, n), "S")], [region], [region], body,
                  match_buffers=[MatchBufferRegion(sub, region)])
    f = func([x], For(i, 0, n, "serial", BlockRealize([i], None, block)))
    xv = np.arange(24, dtype=np.float32).reshape(3, 8)
    want = xv.copy()
    want[:, 2:6] *= 2
    interpret(f, xv, vectorize=vectorize)
    np.testing.assert_array_equal(xv, want)


NON_CONTIGUOUS_REGIONS = """
from tvm.script import tir as T

@T.prim_func
def add_tiles(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (8, 6, 10))
    C = T.match_buffer(c, (8, 10))
    for i, j, k in T.grid(2, 6, 5):
        with T.block():
            T.reads(C[i * 4 : i * 4 + 4, k * 2 : k * 2 + 2])
            T.writes(A[i * 4 : i * 4 + 4, j, k * 2 : k * 2 + 2])
            tile_a = T.match_buffer(A[i * 4 : i * 4 + 4, j, k * 2 : k * 2 + 2], (4, 1, 2), offset_factor=1)
            tile_c = T.match_buffer(C[i * 4 : i * 4 + 4, k * 2 : k * 2 + 2], (4, 2), offset_factor=1)
            for ii, kk in T.grid(4, 2):
                tile_a[ii, 0, kk] += tile_c[ii, kk]
"""


def test_match_buffer_of_a_non_contiguous_region_without_strides_accesses_the_region():
    # TVM's LowerMatchBuffer maps element accesses onto the region whether or not it is
    # contiguous; strides need declaring only for opaque uses (data, elem_offset, strides)
    from backends.target import build_kernels
    from tensorir import from_source
    f = from_source(NON_CONTIGUOUS_REGIONS)
    rng = np.random.default_rng(4)
    a, c = rng.standard_normal((8, 6, 10)).astype(np.float32), rng.standard_normal((8, 10)).astype(np.float32)
    want = a + c[:, None, :]
    for vectorize in (False, True):
        got = a.copy()
        interpret(f, got, c, vectorize=vectorize)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    got = a.copy()
    build_kernels("c", {"add_tiles": f})["add_tiles"](got, c)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@both_paths
def test_if_then_else_let_and_evaluate(vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n])
    i, t = Var("i"), Var("t", "float32")
    then = LetStmt(t, x[i] * 3.0, BufferStore(y, t + 1.0, [i]))
    other = seq(Evaluate(x[i]), BufferStore(y, -x[i], [i]))
    body = loops([(i, n)], IfThenElse(E.EQ(E.FloorMod(i, 2), 0), then, other))
    xv = np.arange(5, dtype=np.float32)
    yv = np.zeros_like(xv)
    interpret(PrimFunc([x, y], body), xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, np.where(np.arange(5) % 2 == 0, xv * 3 + 1, -xv))


@both_paths
def test_allocate_and_alloc_buffer_are_zero_initialised_per_entry(vectorize):
    n = size_var("n")
    y = Buffer("y", [n])
    acc = Buffer("acc", [1], scope="local")
    tmp = Buffer("tmp", [1])
    i, vi = Var("i"), Var("vi")
    # acc is re-created (zeroed) in each block instance; tmp by each Allocate.
    body = seq(BufferStore(acc, acc[0] + 1.0, [0]),
               Allocate(tmp, seq(BufferStore(tmp, tmp[0] + 2.0, [0]),
                                 BufferStore(y, acc[0] + tmp[0], [vi]))))
    block = Block("b", [IterVar(vi, Range(0, n), "S")], [], [point_region(y, [vi])], body,
                  alloc_buffers=[acc])
    f = func([y], For(i, 0, n, "serial", BlockRealize([i], None, block)))
    yv = np.zeros(4, np.float32)
    interpret(f, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, np.full(4, 3.0))


@both_paths
def test_init_runs_when_reduce_vars_are_at_their_minimum_reduce_loop_outermost(vectorize):
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("x", [n, m]), Buffer("y", [n])
    k, i, vi, vk = Var("k"), Var("i"), Var("vi"), Var("vk")
    block = Block("sum", [IterVar(vi, Range(0, n), "S"), IterVar(vk, Range(2, m - 2), "R")],
                  [point_region(x, [vi, vk])], [point_region(y, [vi])],
                  BufferStore(y, y[vi] + x[vi, vk], [vi]), init=BufferStore(y, 100.0, [vi]))
    body = For(k, 0, m - 2, "serial", For(i, 0, n, "serial", BlockRealize([i, k + 2], None, block)))
    xv = np.arange(15, dtype=np.float32).reshape(3, 5)
    yv = np.full(3, -1.0, np.float32)
    interpret(func([x, y], body), xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, 100 + xv[:, 2:].sum(axis=1))


@both_paths
def test_select_masks_errors_in_the_branch_not_taken(vectorize):
    n = size_var("n")
    x, d, y = Buffer("x", [n]), Buffer("d", [n], "int32"), Buffer("y", [n], "int32")
    i = Var("i")
    safe_div = Select(E.NE(d[i], 0), E.Div(Cast("int32", x[i + 1 - 1]), d[i]), IntImm(-1, "int32"))
    # The load x[i + 1] is out of bounds for the last i, but only in the branch not taken there.
    guarded = Select(E.LT(i, n - 1), Cast("int32", x[i + 1]), safe_div)
    body = loops([(i, n)], BufferStore(y, guarded, [i]))
    xv = np.array([7, -7, 9, 4], np.float32)
    dv = np.array([2, 2, 0, 0], np.int32)
    yv = np.zeros(4, np.int32)
    interpret(PrimFunc([x, d, y], body), xv, dv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, [-7, 9, 4, -1])


@both_paths
def test_and_short_circuits_like_c(vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n + 2], "int32")
    i = Var("i")
    cond = E.And(E.LT(i, n), E.GT(x[i], 0.0))
    negated = E.Or(E.GE(i, n), E.Not(E.GT(x[i], 0.0)))
    body = loops([(i, n + 2)], BufferStore(y, Cast("int32", cond) * 10 + Cast("int32", negated), [i]))
    xv = np.array([1, -1, 2], np.float32)
    yv = np.zeros(5, np.int32)
    interpret(PrimFunc([x, y], body), xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, [10, 1, 10, 1, 1])


@both_paths
def test_integer_division_semantics_and_store_casts(vectorize):
    n = size_var("n")
    a, b = Buffer("a", [n], "int32"), Buffer("b", [n], "int32")
    q, fq, fm, mn, mx, cast_out = (Buffer(name, [n], "int32") for name in
                                   ("q", "fq", "fm", "mn", "mx", "cast_out"))
    x = Buffer("x", [n], "float32")
    i = Var("i")
    stores = [BufferStore(q, E.Div(a[i], b[i]), [i]), BufferStore(fq, E.FloorDiv(a[i], b[i]), [i]),
              BufferStore(fm, E.FloorMod(a[i], b[i]), [i]), BufferStore(mn, E.Min(a[i], b[i]), [i]),
              BufferStore(mx, E.Max(a[i], b[i]), [i]),
              BufferStore(cast_out, x[i], [i])]  # float value stored into int32: C truncation
    params = [a, b, x, q, fq, fm, mn, mx, cast_out]
    f = PrimFunc(params, loops([(i, n)], seq(*stores)))
    av = np.array([7, -7, 7, -7], np.int32)
    bv = np.array([2, 2, -2, -2], np.int32)
    xv = np.array([1.9, -1.9, 2.5, -0.5], np.float32)
    outs = [np.zeros(4, np.int32) for _ in range(6)]
    interpret(f, av, bv, xv, *outs, vectorize=vectorize)
    np.testing.assert_array_equal(outs[0], [3, -3, -3, 3])
    np.testing.assert_array_equal(outs[1], av // bv)
    np.testing.assert_array_equal(outs[2], av % bv)
    np.testing.assert_array_equal(outs[3], np.minimum(av, bv))
    np.testing.assert_array_equal(outs[4], np.maximum(av, bv))
    np.testing.assert_array_equal(outs[5], [1, -1, 2, 0])


_REFERENCE = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
    "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "erf": np.vectorize(math.erf), "abs": np.abs, "sin": np.sin, "cos": np.cos, "floor": np.floor,
    "ceil": np.ceil, "round": np.round, "exp2": np.exp2, "log2": np.log2, "tan": np.tan,
    "isnan": np.isnan, "isinf": np.isinf, "pow": lambda v: np.power(v, 1.5),
    "trunc": np.trunc, "log1p": np.log1p, "exp10": lambda v: np.power(10.0, v), "atan": np.arctan,
    "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "atanh": np.arctanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atan2": lambda v: np.arctan2(v, 1.5),
    "hypot": lambda v: np.hypot(v, 1.5), "copysign": lambda v: np.copysign(1.5, v),
    "fmod": lambda v: np.fmod(v, 1.5),
}
# second operand of the binary float intrinsics (the first for copysign: its sign comes from x)
_BINARY = {"pow": 1, "atan2": 1, "hypot": 1, "fmod": 1, "copysign": 0}


@both_paths
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(set(INTRINSICS) - INTEGER_INTRINSICS))
def test_intrinsics_match_numpy_in_the_buffer_dtype(op, dtype, vectorize):
    x = Buffer("x", [8], dtype)
    out_dtype = "bool" if op in ("isnan", "isinf") else dtype
    y = Buffer("y", [8], out_dtype)
    i = Var("i")
    args = [x[i]]
    if op in _BINARY:
        args.insert(_BINARY[op], FloatImm(1.5, dtype))
    f = PrimFunc([x, y], loops([(i, 8)], BufferStore(y, call_intrin(op, *args), [i])))
    xv = np.array([0.5, 1.5, 2.5, 3.0, 0.25, -0.0, np.inf, np.nan], dtype)
    if op in ("log", "sqrt", "rsqrt", "log2", "pow"):
        xv = np.abs(xv)
    yv = np.zeros(8, out_dtype)
    interpret(f, xv, yv, vectorize=vectorize)
    with np.errstate(all="ignore"):
        want = np.asarray(_REFERENCE[op](xv.astype("float64")))
    np.testing.assert_allclose(yv.astype("float64"), want, rtol=1e-6 if dtype == "float32" else 1e-12,
                               equal_nan=True)


def test_round_is_half_to_even():
    x, y = Buffer("x", [4], "float32"), Buffer("y", [4], "float32")
    i = Var("i")
    f = PrimFunc([x, y], loops([(i, 4)], BufferStore(y, call_intrin("round", x[i]), [i])))
    yv = np.zeros(4, np.float32)
    interpret(f, np.array([0.5, 1.5, 2.5, -0.5], np.float32), yv)
    np.testing.assert_array_equal(yv, [0, 2, 2, -0])


@both_paths
def test_scalar_params_positional_and_by_name(vectorize):
    n, offset = size_var("n"), Var("offset")
    x = Buffer("x", [n], "int64")
    i = Var("i")
    f = PrimFunc([x, offset], loops([(i, n)], BufferStore(x, i + offset, [i])))
    xv = np.zeros(3, np.int64)
    interpret(f, xv, 5, vectorize=vectorize)
    np.testing.assert_array_equal(xv, [5, 6, 7])
    interpret(f, xv, offset=-1, vectorize=vectorize)
    np.testing.assert_array_equal(xv, [-1, 0, 1])


@both_paths
def test_nested_blocks_in_an_opaque_outer_block(vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n, 4]), Buffer("y", [n, 4])
    i, vi = Var("i"), Var("vi")
    j, vj = Var("j"), Var("vj")
    inner_block = Block("inner", [IterVar(vj, Range(0, 4), "S")], [point_region(x, [vi, vj])],
                        [point_region(y, [vi, vj])],
                        BufferStore(y, x[vi, vj] + Cast("float32", vi), [vi, vj]))
    outer_body = For(j, 0, 4, "serial", BlockRealize([j], None, inner_block))
    outer = Block("outer", [IterVar(vi, Range(0, n), "S")], [], [], outer_body)
    f = func([x, y], For(i, 0, n, "serial", BlockRealize([i], None, outer)))
    xv = np.ones((3, 4), np.float32)
    yv = np.zeros_like(xv)
    interpret(f, xv, yv, vectorize=vectorize)
    np.testing.assert_array_equal(yv, np.broadcast_to(1 + np.arange(3, dtype=np.float32)[:, None], (3, 4)))


def test_runs_functions_parsed_from_script():
    from tensorir import from_source
    text = '''
@T.prim_func
def add_one(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = x[vi, vj] + T.float32(1)
'''
    f = from_source(text)
    xv = np.arange(8, dtype=np.float32).reshape(2, 4)
    yv = np.zeros_like(xv)
    interpret(f, xv, yv)
    np.testing.assert_array_equal(yv, xv + 1)


def test_scalar_passed_by_name_is_skipped_by_positional_arrays():
    k = Var("k")
    n = size_var("n")
    x, d = Buffer("x", [n], "int64"), Buffer("d", [n], "int64")
    i = Var("i")
    f = PrimFunc([x, k, d], loops([(i, n)], BufferStore(d, x[i] * k, [i])))
    xv, dv = np.arange(4, dtype=np.int64), np.zeros(4, np.int64)
    interpret(f, xv, dv, k=3)
    np.testing.assert_array_equal(dv, xv * 3)
