"""Minimal primitive sequences that the random schedule test once found wrong.

Each either must now give the original results (scheduled and lowered, through
print/parse), or must be refused with ScheduleError leaving the function as it was.
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import T, prim_func
from tests.tensorir.test_schedule_util import assert_replays, assert_roundtrip, assert_same_results

SIZES = [{"n0": 1, "n1": 1, "n2": 1}, {"n0": 3, "n1": 2, "n2": 4}, {"n0": 5, "n1": 7, "n2": 3}]


@prim_func
def row_sum(X: T.Buffer(("n0", "n1"), "float32"), Y: T.Buffer(("n0",), "float32")):
    n0 = T.int64()
    n1 = T.int64()
    for i0, i1 in T.grid(n0, n1):
        with T.block("row_sum"):
            v0, v1 = T.axis.remap("SR", [i0, i1])
            T.reads(X[v0, v1])
            T.writes(Y[v0])
            with T.init():
                Y[v0] = T.float32(0)
            Y[v0] = Y[v0] + X[v0, v1]


@prim_func
def sum_2d(X: T.Buffer(("n0", "n1", "n2"), "float32"), Y: T.Buffer(("n0",), "float32")):
    n0 = T.int64()
    n1 = T.int64()
    n2 = T.int64()
    for i0, i1, i2 in T.grid(n0, n1, n2):
        with T.block("sum_2d"):
            v0, v1, v2 = T.axis.remap("SRR", [i0, i1, i2])
            T.reads(X[v0, v1, v2])
            T.writes(Y[v0])
            with T.init():
                Y[v0] = T.float32(0)
            Y[v0] = Y[v0] + X[v0, v1, v2]


@prim_func
def transpose(X: T.Buffer(("n0", "n1"), "float32"), Y: T.Buffer(("n1", "n0"), "float32")):
    n0 = T.int64()
    n1 = T.int64()
    for i0, i1 in T.grid(n1, n0):
        with T.block("transpose"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(X[v1, v0])
            T.writes(Y[v0, v1])
            Y[v0, v1] = X[v1, v0]


@prim_func
def repeated_sum(X: T.Buffer(("n0", "n1"), "float32"), Y: T.Buffer(("n0",), "float32")):
    # Loop k re-runs the whole reduction: harmless outside it, a double count inside it.
    n0 = T.int64()
    n1 = T.int64()
    for _k, i0, i1 in T.grid(2, n0, n1):
        with T.block("repeated_sum"):
            v0, v1 = T.axis.remap("SR", [i0, i1])
            T.reads(X[v0, v1])
            T.writes(Y[v0])
            with T.init():
                Y[v0] = T.float32(0)
            Y[v0] = Y[v0] + X[v0, v1]


def assert_equivalent(sch, original):
    assert_same_results(original, [sch.func, tir.lower(sch.func)], SIZES, num_inputs=1)
    assert_roundtrip(sch.func)
    assert_roundtrip(tir.lower(sch.func))
    assert_replays(sch, original)


def assert_refused(sch, primitive, *args, match):
    before, trace_len = sch.func, len(sch.trace)
    with pytest.raises(tir.ScheduleError, match=match):
        getattr(sch, primitive)(*args)
    assert sch.func is before and len(sch.trace) == trace_len


# ----------------------------------------------------------------- reorder keeps init first
def test_reorder_of_fused_spatial_reduce_pieces_is_refused():
    # fused = v0 * n1 + v1; swapping its split pieces ran row 1's updates before its init.
    sch = tir.Schedule(row_sum)
    fused = sch.fuse(*sch.get_loops(sch.get_block("row_sum")))
    outer, inner = sch.split(fused, [None, 2])
    assert_refused(sch, "reorder", inner, outer, match="binds both spatial and reduction")
    assert_equivalent(sch, row_sum)


def test_reorder_of_a_fused_spatial_reduce_loop_with_a_reduce_loop_is_refused():
    sch = tir.Schedule(sum_2d)
    i0, i1, i2 = sch.get_loops(sch.get_block("sum_2d"))
    fused = sch.fuse(i0, i1)
    assert_refused(sch, "reorder", i2, fused, match="binds both spatial and reduction")


def test_reorder_putting_a_reduce_loop_outermost_keeps_results():
    sch = tir.Schedule(sum_2d)
    i0, i1, i2 = sch.get_loops(sch.get_block("sum_2d"))
    # Every element still starts with its init; lowering must not reset it per outer step.
    sch.reorder(i2, i0, i1)
    assert_equivalent(sch, sum_2d)


def test_reorder_moving_an_unused_loop_inside_a_reduction_is_refused():
    sch = tir.Schedule(repeated_sum)
    k, i0, i1 = sch.get_loops(sch.get_block("repeated_sum"))
    assert_refused(sch, "reorder", i1, k, match="not used by block 'repeated_sum'")
    sch.reorder(i0, k)  # k stays outside the reduction loop
    assert_equivalent(sch, repeated_sum)


# ----------------------------------------------------------------- blockize of inner reduce loops
@pytest.mark.parametrize("reorder_outer", [False, True])
def test_blockize_inner_reduce_loop_keeps_init_guarded_when_lowered(reorder_outer):
    # The inner block's reduce var v1 follows the outer block's; lowering once hoisted the
    # init out of the inner loop unguarded, resetting the sum on every outer reduce step.
    sch = tir.Schedule(sum_2d)
    i2 = sch.get_loops(sch.get_block("sum_2d"))[2]
    outer = sch.blockize(i2)
    if reorder_outer:
        i0, i1 = sch.get_loops(outer)
        sch.reorder(i1, i0)
    assert_equivalent(sch, sum_2d)


# ----------------------------------------------------------------- nested consumers
def _blockized_transpose_with_cache():
    sch = tir.Schedule(transpose)
    inner_loop = sch.get_loops(sch.get_block("transpose"))[1]
    outer = sch.blockize(inner_loop)
    cache = sch.cache_read(outer, 0, "local")
    return sch, outer, cache


def test_compute_at_under_a_blockized_consumer_binds_only_visible_vars():
    # The inner block's regions are in the outer block's iter vars; compute_at once used them
    # and left the cache copy bound to an iter var that does not exist outside that block.
    sch, outer, cache = _blockized_transpose_with_cache()
    sch.compute_at(cache, sch.get_loops(outer)[0])
    assert_equivalent(sch, transpose)


def test_compute_inline_into_a_blockized_consumer_drops_every_reference():
    sch, _, cache = _blockized_transpose_with_cache()
    sch.compute_inline(cache)
    regions = tir.collect(sch.func, lambda n: isinstance(n, tir.BufferRegion))
    assert all(r.buffer.name != "X_local" for r in regions)
    assert_equivalent(sch, transpose)


def test_reverse_compute_at_of_a_blockized_producer_uses_the_outer_block():
    sch = tir.Schedule(transpose)
    producer = sch.get_block("transpose")
    sch.cache_write(producer, 0, "local")
    outer = sch.blockize(sch.get_loops(producer)[1])
    loop = sch.get_loops(outer)[0]
    # The outer block writes a whole row, not a point: the move is refused cleanly.
    assert_refused(sch, "reverse_compute_at", sch.get_block("Y_local"), loop,
                   match="producer 'transpose_o' must write")


# ----------------------------------------------------------------- reductions split across blocks
def test_decompose_reduction_inside_a_blockized_reduction_is_refused():
    # The inner block's v1 follows the outer block's reduce var: an init block placed inside
    # the outer block would reset the sum on each of its steps.
    sch = tir.Schedule(sum_2d)
    block = sch.get_block("sum_2d")
    sch.blockize(sch.get_loops(block)[2])
    assert_refused(sch, "decompose_reduction", block, sch.get_loops(block)[0],
                   match="follows 'vi1' outside the loops")
    assert_refused(sch, "rfactor", sch.get_loops(block)[0], 0, match="follows 'vi1' outside the loops")


def test_decompose_reduction_of_inner_loops_still_works():
    sch = tir.Schedule(sum_2d)
    block = sch.get_block("sum_2d")
    sch.decompose_reduction(block, sch.get_loops(block)[1])
    assert_equivalent(sch, sum_2d)


# ----------------------------------------------------------------- moving a block earlier
@prim_func
def abs_plus_bias(X: T.Buffer(("n0", 2), "float32"), B: T.Buffer((2,), "float32"),
                  Y: T.Buffer(("n0", 2), "float32")):
    n0 = T.int64()
    A = T.alloc_buffer((n0, 2), "float32")
    for i0, i1 in T.grid(n0, 2):
        with T.block("abs"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(X[v0, v1])
            T.writes(A[v0, v1])
            A[v0, v1] = T.abs(X[v0, v1])
    for i0, i1 in T.grid(n0, 2):
        with T.block("add"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            T.reads(A[v0, v1], B[v1])
            T.writes(Y[v0, v1])
            Y[v0, v1] = A[v0, v1] + B[v1]


def test_reverse_compute_at_over_a_writer_of_another_input_is_refused():
    # The bias cache is filled before "abs"; moving "add" under its loop would read A unwritten.
    sch = tir.Schedule(abs_plus_bias)
    consumer = sch.get_block("add")
    cache = sch.cache_read(consumer, 1, "local")
    assert_refused(sch, "reverse_compute_at", consumer, sch.get_loops(cache)[0],
                   match="block 'abs' between the loop and the block writes a buffer the block reads")
    assert_equivalent(sch, abs_plus_bias)


# ----------------------------------------------------------------- blocks with no loops around them
@prim_func
def add_scalar(X: T.Buffer((3,), "float32"), S: T.Buffer((), "float32"), Y: T.Buffer((3,), "float32")):
    for i in range(3):
        with T.block("add"):
            v = T.axis.remap("S", [i])
            T.reads(X[v], S[()])
            T.writes(Y[v])
            Y[v] = X[v] + S[()]


def test_cache_read_of_a_cache_of_a_0d_buffer_is_filled_after_it():
    # The 0-d copy block has no loop around it; it was not seen as the writer of S_local,
    # so the second copy ran first and read S_local before it was filled.
    sch = tir.Schedule(add_scalar)
    block = sch.get_block("add")
    sch.cache_read(block, 1, "local")
    sch.cache_read(block, 1, "local")
    names = [r.block.name for r in tir.collect(sch.func, lambda n: isinstance(n, tir.BlockRealize))]
    assert names.index("S_local") < names.index("S_local_local") < names.index("add")
    assert_equivalent(sch, add_scalar)


# ----------------------------------------------------------------- disjunctive predicates
@prim_func
def row_sum_where_or(X: T.Buffer(("n0", "n1"), "float32"), Y: T.Buffer(("n0",), "float32"),
                     m: T.int64):
    n0 = T.int64()
    n1 = T.int64()
    for i0, i1 in T.grid(n0, n1):
        with T.block("row_sum"):
            T.where(i0 < 2 or m < 2)
            v0, v1 = T.axis.remap("SR", [i0, i1])
            T.reads(X[v0, v1])
            T.writes(Y[v0])
            with T.init():
                Y[v0] = T.float32(0)
            Y[v0] = Y[v0] + X[v0, v1]


@pytest.mark.parametrize("m", [1, 5])
def test_decompose_reduction_keeps_a_disjunctive_predicate_whole(m):
    # `i0 < 2 or m < 2` was split like a conjunction: the init ran under `i0 < 2 and m < 2`,
    # so for m = 5 rows 0 and 1 summed onto whatever Y held.
    sch = tir.Schedule(row_sum_where_or)
    i0, i1 = sch.get_loops(sch.get_block("row_sum"))
    sch.decompose_reduction(sch.get_block("row_sum"), i1)
    sizes = [{"n0": 4, "n1": 3, "m": m}]
    rng = np.random.default_rng(0)
    for candidate in (sch.func, tir.lower(sch.func)):
        x = rng.uniform(-1, 1, (4, 3)).astype("float32")
        y = np.full(4, 7.0, "float32")
        expected = y.copy()
        covered = [r for r in range(4) if r < 2 or m < 2]
        expected[covered] = x[covered].sum(axis=1)
        got = [x.copy(), y.copy()]
        tir.interpret(candidate, *got, m=m)
        np.testing.assert_allclose(got[1], expected, rtol=1e-5, err_msg=f"sizes {sizes}")
    assert_roundtrip(sch.func)
