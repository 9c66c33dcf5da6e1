"""Before/Expected (TVM style): each GPU rule on a small function gives exactly
the expected bound schedule (structural equality), and the expected function
computes what the unscheduled one computes."""
from __future__ import annotations

import pytest

import tensorir as tir
from tensorir import T, prim_func
from tensorir.schedule_rules.gpu import default_gpu_schedule
from tests.tensorir.test_schedule_util import assert_roundtrip, assert_same_results


@prim_func
def add_one(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("y"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = x[vi, vj] + T.float32(1)


@prim_func
def add_one_expected(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    T.func_attr({"tir.is_scheduled": True, "tir.gpu_schedule_rule": "injective"})
    for i_j_fused_0 in T.thread_binding((n * 4 + 255) // 256, thread="blockIdx.x"):
        for i_j_fused_1 in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("y"):
                vi = T.axis.spatial(n, i_j_fused_0 * 64 + i_j_fused_1 // 4)
                vj = T.axis.spatial(4, i_j_fused_1 % 4)
                T.where(i_j_fused_0 * 256 + i_j_fused_1 < n * 4)
                T.reads(x[vi, vj])
                T.writes(y[vi, vj])
                y[vi, vj] = x[vi, vj] + 1.0


@prim_func
def row_sum_scale(x: T.Buffer(("n", 48), "float32"), y: T.Buffer(("n", 48), "float32")):
    n = T.int64()
    s = T.alloc_buffer((n,), "float32")
    for i, k in T.grid(n, 48):
        with T.block("s"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                s[vi] = T.float32(0)
            s[vi] = s[vi] + x[vi, vk]
    for i, j in T.grid(n, 48):
        with T.block("y"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = x[vi, vj] / s[vi]


@prim_func
def row_sum_scale_expected(x: T.Buffer(("n", 48), "float32"), y: T.Buffer(("n", 48), "float32")):
    n = T.int64()
    T.func_attr({"tir.is_scheduled": True, "tir.gpu_schedule_rule": "row_reduction"})
    s = T.alloc_buffer((n,), "float32", scope="shared")
    for i in T.thread_binding(n, thread="blockIdx.x"):
        for ax0 in range(1):
            for ax1_1 in T.thread_binding(64, thread="threadIdx.x"):
                for ax1_0 in range(1):
                    with T.block("s"):
                        vi = T.axis.spatial(n, ax0 + i)
                        vk = T.axis.reduce(48, ax1_0 * 64 + ax1_1)
                        T.where(ax1_0 * 64 + ax1_1 < 48)
                        T.reads(s[vi], x[vi, vk])
                        T.writes(s[vi])
                        with T.init():
                            s[vi] = 0.0
                        s[vi] = s[vi] + x[vi, vk]
        for j_1 in T.thread_binding(64, thread="threadIdx.x"):
            for j_0 in range(1):
                with T.block("y"):
                    vi_1 = T.axis.spatial(n, i)
                    vj = T.axis.spatial(48, j_0 * 64 + j_1)
                    T.where(j_0 * 64 + j_1 < 48)
                    T.reads(x[vi_1, vj], s[vi_1])
                    T.writes(y[vi_1, vj])
                    y[vi_1, vj] = x[vi_1, vj] / s[vi_1]


@prim_func
def masked_row_sum(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i, k in T.grid(n, n):
        with T.block("y"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k <= i)
            with T.init():
                y[vi] = T.float32(0)
            y[vi] = y[vi] + x[vk]


@prim_func
def masked_row_sum_expected(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    T.func_attr({"tir.is_scheduled": True, "tir.gpu_schedule_rule": "row_reduction"})
    for i in T.thread_binding(n, thread="blockIdx.x"):
        for k_1 in T.thread_binding(256, thread="threadIdx.x"):
            for k_0 in range((n + 255) // 256):
                with T.block("y"):
                    vi = T.axis.spatial(n, i)
                    vk = T.axis.reduce(n, k_0 * 256 + k_1)
                    T.where(k_0 * 256 + k_1 <= i and k_0 * 256 + k_1 < n)
                    T.reads(y[vi], x[vk])
                    T.writes(y[vi])
                    with T.init():
                        y[vi] = 0.0
                    y[vi] = y[vi] + x[vk]


@prim_func
def gemv(a: T.Buffer((1, 64), "float32"), w: T.Buffer(("m", 64), "float32"), c: T.Buffer((1, "m"), "float32")):
    m = T.int64()
    for i, j, k in T.grid(1, m, 64):
        with T.block("c"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * w[vj, vk]


@prim_func
def gemv_expected(a: T.Buffer((1, 64), "float32"), w: T.Buffer(("m", 64), "float32"),
                  c: T.Buffer((1, "m"), "float32")):
    m = T.int64()
    T.func_attr({"tir.is_scheduled": True, "tir.gpu_schedule_rule": "gemv"})
    for i_j_fused in T.thread_binding(m, thread="blockIdx.x"):
        for k_1 in T.thread_binding(64, thread="threadIdx.x"):
            for k_0 in range(1):
                with T.block("c"):
                    vi = T.axis.spatial(1, i_j_fused // m)
                    vj = T.axis.spatial(m, i_j_fused % m)
                    vk = T.axis.reduce(64, k_0 * 64 + k_1)
                    T.reads(c[vi, vj], a[vi, vk], w[vj, vk])
                    T.writes(c[vi, vj])
                    with T.init():
                        c[vi, vj] = 0.0
                    c[vi, vj] = c[vi, vj] + a[vi, vk] * w[vj, vk]


@prim_func
def column_sum_scale(x: T.Buffer((8, "m"), "float32"), y: T.Buffer(("m",), "float32")):
    m = T.int64()
    s = T.alloc_buffer((m,), "float32")
    for k, j in T.grid(8, m):
        with T.block("s"):
            vj, vk = T.axis.remap("SR", [j, k])
            with T.init():
                s[vj] = T.float32(0)
            s[vj] = s[vj] + x[vk, vj]
    for j in range(m):
        with T.block("y"):
            vj = T.axis.remap("S", [j])
            y[vj] = s[vj] * T.float32(2)


@prim_func
def column_sum_scale_expected(x: T.Buffer((8, "m"), "float32"), y: T.Buffer(("m",), "float32")):
    # no row loop (the reduction loop is outermost): the fallback moves the spatial loop
    # out and binds it; each thread sums its column serially; the scale is its own launch
    m = T.int64()
    T.func_attr({"tir.is_scheduled": True, "tir.gpu_schedule_rule": "fallback"})
    s = T.alloc_buffer((m,), "float32")
    for j_0 in T.thread_binding((m + 255) // 256, thread="blockIdx.x"):
        for j_1 in T.thread_binding(256, thread="threadIdx.x"):
            for k in range(8):
                with T.block("s"):
                    vj = T.axis.spatial(m, j_0 * 256 + j_1)
                    vk = T.axis.reduce(8, k)
                    T.where(j_0 * 256 + j_1 < m)
                    T.reads(s[vj], x[vk, vj])
                    T.writes(s[vj])
                    with T.init():
                        s[vj] = 0.0
                    s[vj] = s[vj] + x[vk, vj]
    for j_0 in T.thread_binding((m + 255) // 256, thread="blockIdx.x"):
        for j_1 in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("y"):
                vj = T.axis.spatial(m, j_0 * 256 + j_1)
                T.where(j_0 * 256 + j_1 < m)
                T.reads(s[vj])
                T.writes(y[vj])
                y[vj] = s[vj] * 2.0


CASES = [(add_one, add_one_expected, [{"n": 1}, {"n": 65}]),
         (row_sum_scale, row_sum_scale_expected, [{"n": 1}, {"n": 3}]),
         (masked_row_sum, masked_row_sum_expected, [{"n": 1}, {"n": 7}, {"n": 300}]),
         (gemv, gemv_expected, [{"m": 1}, {"m": 5}]),
         (column_sum_scale, column_sum_scale_expected, [{"m": 1}, {"m": 257}])]


@pytest.mark.parametrize("before, expected, sizes", CASES, ids=[c[0].name for c in CASES])
def test_rule_gives_expected_schedule(before, expected, sizes):
    after = default_gpu_schedule(before)
    tir.assert_structural_equal(after, expected)
    assert_roundtrip(after)
    assert_same_results(before, [expected], sizes)
