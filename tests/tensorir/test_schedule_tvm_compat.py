"""Issue 15 item 9: schedule strictness and generality as in TVM, on functions written as
TVMScript users write them. Refused: split/fuse of thread-bound or annotated loops,
parallel over bindings that are not quasi-affine, vectorize over an opaque block, reorder
across a predicate relating the loops. Accepted, and checked against the interpreter for
several sizes, after lowering too: reverse_compute_inline with non-identity affine reads,
over-computed producers and sum-reduction producers; compute_at likewise."""
from __future__ import annotations

import pytest

import tensorir as tir
from tensorir import T, prim_func
from tests.tensorir.test_schedule_util import (assert_replays, assert_roundtrip,
                                               assert_same_results)

SIZES = [{"n": 1}, {"n": 3}, {"n": 8}]


def _check(sch, original, sizes=SIZES):
    assert_same_results(original, [sch.func, tir.lower(sch.func)], sizes)
    assert_roundtrip(sch.func)
    assert_replays(sch, original)


def _unchanged_after_error(sch, action, fragment):
    before = sch.func
    with pytest.raises(tir.ScheduleError, match=fragment):
        action()
    tir.assert_structural_equal(sch.func, before)


@prim_func
def add_one(x: T.Buffer(("n", 64), "float32"), y: T.Buffer(("n", 64), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 64):
        with T.block("y"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = x[vi, vj] + T.float32(1)


# ---------------------------------------------------------------- strictness
def test_split_or_fuse_of_a_bound_loop_is_refused_but_split_before_binding_works():
    sch = tir.Schedule(add_one)
    i, j = sch.get_loops(sch.get_block("y"))
    jo, ji = sch.split(j, [None, 32])          # the GPU way: split, then bind
    sch.bind(ji, "threadIdx.x")
    sch.bind(jo, "blockIdx.x")
    _unchanged_after_error(sch, lambda: sch.split(ji, [2, 16]), "bound to threadIdx.x")
    _unchanged_after_error(sch, lambda: sch.fuse(jo, ji), "bound to blockIdx.x")


def test_split_or_fuse_of_an_annotated_loop_is_refused_until_unannotated():
    sch = tir.Schedule(add_one)
    i, j = sch.get_loops(sch.get_block("y"))
    sch.annotate(j, "pragma_unroll_explicit", 1)
    _unchanged_after_error(sch, lambda: sch.split(j, [None, 8]), "has annotations")
    _unchanged_after_error(sch, lambda: sch.fuse(i, j), "has annotations")
    sch.unannotate(j, "pragma_unroll_explicit")
    sch.fuse(i, j)
    _check(sch, add_one)


@prim_func
def squares(x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32")):
    for i in range(4):
        with T.block("y"):
            vi = T.axis.spatial(16, i * i)
            y[vi] = x[vi] * T.float32(2)


def test_parallel_over_a_binding_that_is_not_quasi_affine_is_refused():
    sch = tir.Schedule(squares)
    (i,) = sch.get_loops(sch.get_block("y"))
    _unchanged_after_error(sch, lambda: sch.parallel(i), "not quasi-affine")
    _unchanged_after_error(sch, lambda: sch.vectorize(i), "not quasi-affine")


def test_parallel_over_split_and_fused_symbolic_loops_is_quasi_affine():
    sch = tir.Schedule(add_one)
    i, j = sch.get_loops(sch.get_block("y"))
    jo, ji = sch.split(j, [None, 16])
    fused = sch.fuse(i, jo)
    sch.parallel(fused)
    sch.vectorize(ji)
    _check(sch, add_one)


@prim_func
def opaque_copy(x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("copy"):
            T.reads(x[i])
            T.writes(y[i])
            y[i] = x[i]


def test_vectorize_over_an_opaque_block_is_refused():
    sch = tir.Schedule(opaque_copy)
    (i,) = sch.get_loops(sch.get_block("copy"))
    _unchanged_after_error(sch, lambda: sch.vectorize(i), "opaque")


@prim_func
def lower_triangle(x: T.Buffer((8, 8), "float32"), y: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("y"):
            T.where(j <= i)
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = x[vi, vj]


def test_reorder_across_a_predicate_relating_the_loops_is_refused():
    sch = tir.Schedule(lower_triangle)
    i, j = sch.get_loops(sch.get_block("y"))
    _unchanged_after_error(sch, lambda: sch.reorder(j, i), "predicate")


@prim_func
def products(x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("y"):
            vi = T.axis.spatial(16, i * j)
            y[vi] = x[vi] + T.float32(1)


def test_reorder_over_a_binding_that_is_not_quasi_affine_is_refused():
    sch = tir.Schedule(products)
    i, j = sch.get_loops(sch.get_block("y"))
    _unchanged_after_error(sch, lambda: sch.reorder(j, i), "not quasi-affine")


def test_reorder_after_a_guarded_split_is_accepted():
    sch = tir.Schedule(add_one)
    i, j = sch.get_loops(sch.get_block("y"))
    io, ii = sch.split(i, [None, 4])       # guarded: i_0 * 4 + i_1 < n
    sch.reorder(ii, io)
    _check(sch, add_one)


# ---------------------------------------------------------------- reverse_compute_inline
@prim_func
def shifted(x: T.Buffer(("n + 1",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n + 1,), "float32")
    for i in range(n + 1):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            t[vi] = T.exp(x[vi])
    for i in range(n):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            y[vi] = t[vi + 1] * T.float32(3)


@prim_func
def transposed(x: T.Buffer(("n", 4), "float32"), y: T.Buffer((4, "n"), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            t[vi, vj] = x[vi, vj] + T.float32(1)
    for i, j in T.grid(4, n):
        with T.block("Q"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = t[vj, vi] * T.float32(2)


@prim_func
def reshaped(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n * 4",), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            t[vi, vj] = T.sqrt(T.abs(x[vi, vj]))
    for i in range(n * 4):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            y[vi] = t[vi // 4, vi % 4] - T.float32(1)


@prim_func
def first_row(x: T.Buffer(("n", 4), "float32"), y: T.Buffer((4,), "float32")):
    n = T.int64(lower=1)
    t = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            t[vi, vj] = x[vi, vj] * x[vi, vj]
    for j in range(4):
        with T.block("Q"):
            vj = T.axis.remap("S", [j])
            y[vj] = t[0, vj] + T.float32(1)


@prim_func
def matmul_bias(a: T.Buffer(("n", 6), "float32"), b: T.Buffer((6, 5), "float32"),
                bias: T.Buffer((5,), "float32"), c: T.Buffer(("n", 5), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 5), "float32")
    for i, j, k in T.grid(n, 5, 6):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                t[vi, vj] = T.float32(0)
            t[vi, vj] = t[vi, vj] + a[vi, vk] * b[vk, vj]
    for i, j in T.grid(n, 5):
        with T.block("epilogue"):
            vi, vj = T.axis.remap("SS", [i, j])
            c[vi, vj] = (t[vi, vj] + bias[vj]) * T.float32(0.5)


@prim_func
def matmul_exp(a: T.Buffer(("n", 6), "float32"), b: T.Buffer((6, 5), "float32"),
               c: T.Buffer(("n", 5), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 5), "float32")
    for i, j, k in T.grid(n, 5, 6):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                t[vi, vj] = T.float32(0)
            t[vi, vj] = t[vi, vj] + a[vi, vk] * b[vk, vj]
    for i, j in T.grid(n, 5):
        with T.block("epilogue"):
            vi, vj = T.axis.remap("SS", [i, j])
            c[vi, vj] = T.exp(t[vi, vj])


@pytest.mark.parametrize("func", [shifted, transposed, reshaped, first_row, matmul_bias],
                         ids=lambda f: f.name)
def test_reverse_compute_inline_generality(func):
    sch = tir.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("Q" if func is not matmul_bias else "epilogue"))
    assert "t[" not in sch.func.script()     # the intermediate is gone
    _check(sch, func, [{"n": 1}, {"n": 3}, {"n": 7}])


def test_over_computed_producer_gets_a_predicate():
    sch = tir.Schedule(first_row)
    sch.reverse_compute_inline(sch.get_block("Q"))
    assert "T.where(" in sch.func.script()


def test_reduction_producer_takes_the_epilogue_into_init_and_update():
    sch = tir.Schedule(matmul_bias)
    sch.reverse_compute_inline(sch.get_block("epilogue"))
    text = sch.func.script()
    assert "c[vi, vj] = bias[vj] * 0.5" in text                       # the init
    assert "c[vi, vj] = c[vi, vj] + 0.5 * (a[vi, vk] * b[vk, vj])" in text   # the update


def test_reduction_producer_with_a_non_affine_epilogue_is_refused():
    sch = tir.Schedule(matmul_exp)
    _unchanged_after_error(sch, lambda: sch.reverse_compute_inline(sch.get_block("epilogue")),
                           "not s \\* t")


# ---------------------------------------------------------------- compute_at
@pytest.mark.parametrize("func,consumer", [(shifted, "Q"), (transposed, "Q"), (reshaped, "Q"),
                                           (first_row, "Q"), (matmul_bias, "epilogue")],
                         ids=lambda x: getattr(x, "name", x))
def test_compute_at_under_the_consumer_loop(func, consumer):
    sch = tir.Schedule(func)
    producer = "P" if func is not matmul_bias else "matmul"
    loops = sch.get_loops(sch.get_block(consumer))
    sch.compute_at(sch.get_block(producer), loops[0])
    _check(sch, func, [{"n": 1}, {"n": 3}, {"n": 7}])
