"""The elementwise rule splits an inner axis that loads read through ``v // d`` and ``v % d`` (a
reshape merging axes after a transpose, e.g. attention heads back into the hidden width) by
``d``, so the vector loop reads contiguously. Before/Expected (TVM style), the cases left alone,
and the C build against the interpreter for random layouts and several values of ``n``."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tensorir import T, prim_func
from tensorir.compute import compute, create_prim_func, placeholder
from tensorir.schedule_rules import default_cpu_schedule
from tests.tensorir.test_schedule_util import assert_roundtrip, assert_same_results

N_VALUES = (1, 3, 17, 66)


@prim_func
def merge_heads(x: T.Buffer((4, "n", 32), "float32"), y: T.Buffer(("n", 128), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 4, 32), "float32")
    for i, h, d in T.grid(n, 4, 32):
        with T.block("t"):
            vi, vh, vd = T.axis.remap("SSS", [i, h, d])
            t[vi, vh, vd] = x[vh, vi, vd]
    for i, j in T.grid(n, 128):
        with T.block("y"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = t[vi, vj // 32, vj % 32]


@prim_func
def merge_heads_expected(x: T.Buffer((4, "n", 32), "float32"), y: T.Buffer(("n", 128), "float32")):
    n = T.int64()
    T.func_attr({"tir.is_scheduled": True})
    for i_j_0_fused in T.parallel(n * 4):
        for j_1 in T.vectorized(32):
            with T.block("y"):
                vi = T.axis.spatial(n, i_j_0_fused // 4)
                vj = T.axis.spatial(128, j_1 + i_j_0_fused % 4 * 32)
                T.reads(x[vj // 32, vi, vj % 32])
                T.writes(y[vi, vj])
                y[vi, vj] = x[vj // 32, vi, vj % 32]


def test_regrouped_inner_axis_is_split_by_its_divisor():
    after = default_cpu_schedule(merge_heads)
    tir.assert_structural_equal(after, merge_heads_expected)
    assert_roundtrip(after)
    assert_same_results(merge_heads, [after, merge_heads_expected], [{"n": v} for v in N_VALUES])


def _inner_loops(func):
    """(kind, constant extent or None) of every loop, sorted: a parallel loop over a symbolic
    extent and the vector loop are the whole nest here."""
    return sorted(((lp.kind, getattr(lp.extent, "value", None))
                   for lp in tir.collect(func.body, lambda node: isinstance(node, tir.For))), key=str)


def _regroup(width: int, divisor: int):
    """y[i, j] = x[j // divisor, i, j % divisor] * 2 with j < width (the reshape already inlined)."""
    n = tir.size_var("n")
    x = placeholder((-(-width // divisor), n, divisor), "float32", "x")
    y = compute((n, width), lambda i, j: x[j // divisor, i, j % divisor] * 2.0, "y")
    return create_prim_func([x, y], name="regroup")


def test_divisors_that_do_not_fit_leave_the_inner_loop_whole():
    # 8 lanes are below a vector chunk, 48 does not divide 128: the inner loop keeps its full width
    for divisor in (8, 48):
        loops = _inner_loops(default_cpu_schedule(_regroup(128, divisor)))
        assert loops == [("parallel", None), ("vectorized", 128)], divisor
    # the split applies where it fits
    assert _inner_loops(default_cpu_schedule(_regroup(128, 64))) == [("parallel", None), ("vectorized", 64)]


@st.composite
def _layouts(draw):
    heads = draw(st.sampled_from([1, 2, 3, 8]))
    head_dim = draw(st.sampled_from([16, 24, 32, 64]))
    order = draw(st.permutations([0, 1, 2]))      # where n, heads and head_dim sit in the input
    sizes = draw(st.lists(st.sampled_from(N_VALUES), min_size=2, max_size=3, unique=True))
    return heads, head_dim, order, sizes


@settings(max_examples=12, deadline=None)
@given(_layouts())
def test_c_build_of_split_regroups_matches_the_interpreter(layout):
    heads, head_dim, order, sizes = layout
    n = tir.size_var("n")
    dims = (n, heads, head_dim)
    x = placeholder(tuple(dims[a] for a in order), "float32", "x")

    def read(i, j):
        index = (i, j // head_dim, j % head_dim)
        return x[tuple(index[a] for a in order)]
    y = compute((n, heads * head_dim), lambda i, j: read(i, j) + 1.0, "y")
    func = create_prim_func([x, y], name="merge")
    scheduled = default_cpu_schedule(func)
    module = build_kernels("c", scheduled)
    rng = np.random.default_rng(heads * head_dim)
    for value in sizes:
        shape = tuple((value, heads, head_dim)[a] for a in order)
        data = rng.standard_normal(shape).astype(np.float32)
        got = np.zeros((value, heads * head_dim), np.float32)
        module["merge"](data, got)
        expected = np.zeros_like(got)
        tir.interpret(func, data.copy(), expected, vectorize=False)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got, data.transpose(np.argsort(order)).reshape(value, -1) + 1.0)
