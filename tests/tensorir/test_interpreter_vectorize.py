"""The vectorised path must equal the scalar path, including where vectorising is invalid.

Each case states its serial meaning with a plain Python loop, and runs with
the normal chunk size and with tiny chunks (so chunk boundaries fall inside
loops and reductions).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorir import (Block, BlockRealize, Buffer, BufferStore, For, IterVar, PrimFunc, Range, Var,
                      interpret, size_var)
from tensorir import expr as E
from tensorir.interpreter import nest
from tests.tensorir.generators import (make_inputs, point_region, prim_funcs, root_realize, sym_sizes,
                                       tolerance)


@pytest.fixture(params=["default_chunks", "tiny_chunks"])
def chunking(request, monkeypatch):
    if request.param == "tiny_chunks":
        monkeypatch.setattr(nest, "CHUNK_LANES", 5)
    return request.param


def run_all_ways(f, *arrays):
    """Run on copies with each path; assert they agree and return the vectorised results."""
    vec = [a.copy() for a in arrays]
    ref = [a.copy() for a in arrays]
    interpret(f, *vec)
    interpret(f, *ref, vectorize=False)
    for got, want in zip(vec, ref):
        np.testing.assert_array_equal(got, want)
    return vec


def loop1(n, body_fn, name="i"):
    i = Var(name)
    return For(i, 0, n, "serial", body_fn(i))


def test_prefix_sum_reads_what_an_earlier_iteration_wrote(chunking):
    n = size_var("n")
    x = Buffer("x", [n])
    f = PrimFunc([x], loop1(n - 1, lambda i: BufferStore(x, x[i + 1] + x[i], [i + 1])))
    (out,) = run_all_ways(f, np.arange(1, 9, dtype=np.float32))
    np.testing.assert_array_equal(out, np.cumsum(np.arange(1, 9, dtype=np.float32)))


def row_recurrence_func():
    """y[i, j] = y[i - 1, j] + x[i, j]: a dependence between rows only."""
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("x", [n, m]), Buffer("y", [n, m])
    i, j = Var("i"), Var("j")
    prev = E.Select(E.GT(i, 0), y[E.Max(i - 1, 0), j], E.FloatImm(0.0, "float32"))
    body = For(i, 0, n, "serial", For(j, 0, m, "serial", BufferStore(y, prev + x[i, j], [i, j])))
    return PrimFunc([x, y], body)


def test_recurrence_over_rows(chunking):
    xv = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = run_all_ways(row_recurrence_func(), xv, np.zeros_like(xv))[1]
    np.testing.assert_array_equal(out, np.cumsum(xv, axis=0))


def test_in_place_reversal_has_serial_meaning(chunking):
    n = size_var("n")
    x = Buffer("x", [n])
    f = PrimFunc([x], loop1(n, lambda i: BufferStore(x, x[n - 1 - i], [i])))
    data = np.arange(7, dtype=np.float32)
    want = data.copy()
    for i in range(7):
        want[i] = want[6 - i]
    (out,) = run_all_ways(f, data)
    np.testing.assert_array_equal(out, want)


def test_in_place_update_of_own_element(chunking):
    x = Buffer("x", [6])
    f = PrimFunc([x], loop1(6, lambda i: BufferStore(x, x[i] * 2.0 + 1.0, [i])))
    (out,) = run_all_ways(f, np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(out, np.arange(6) * 2 + 1)


def test_repeated_writes_keep_the_last_one(chunking):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [3])
    f = PrimFunc([x, y], loop1(n, lambda i: BufferStore(y, x[i], [E.FloorMod(i, 3)])))
    out = run_all_ways(f, np.arange(8, dtype=np.float32), np.zeros(3, np.float32))[1]
    np.testing.assert_array_equal(out, [6, 7, 5])


def test_non_injective_reduction_groups_by_element(chunking):
    n = size_var("n")
    x, y = Buffer("x", [n], "int32"), Buffer("y", [3], "int32")
    f = PrimFunc([x, y], loop1(n, lambda i: BufferStore(y, y[E.FloorDiv(i, 3)] + x[i], [E.FloorDiv(i, 3)])))
    out = run_all_ways(f, np.arange(9, dtype=np.int32), np.ones(3, np.int32))[1]
    np.testing.assert_array_equal(out, [1 + 0 + 1 + 2, 1 + 3 + 4 + 5, 1 + 6 + 7 + 8])


def test_max_reduction_with_predicate_and_init(chunking):
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("x", [n, m]), Buffer("y", [n])
    i, k, vi, vk = Var("i"), Var("k"), Var("vi"), Var("vk")
    # Only columns with k < 3 take part; init sets the start value.
    block = Block("rmax", [IterVar(vi, Range(0, n), "S"), IterVar(vk, Range(0, m), "R")],
                  [point_region(x, [vi, vk])], [point_region(y, [vi])],
                  BufferStore(y, E.Max(y[vi], x[vi, vk]), [vi]), init=BufferStore(y, -100.0, [vi]))
    realize = BlockRealize([i, k], E.LT(k, 3), block)
    body = For(i, 0, n, "serial", For(k, 0, m, "serial", realize))
    f = PrimFunc([x, y], root_realize(body))
    xv = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    out = run_all_ways(f, xv, np.zeros(4, np.float32))[1]
    np.testing.assert_array_equal(out, xv[:, :3].max(axis=1))


def test_aliased_arguments_fall_back_to_serial_meaning(chunking):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n])
    f = PrimFunc([x, y], loop1(n - 1, lambda i: BufferStore(y, x[i] + 1.0, [i + 1])))
    data = np.zeros(6, np.float32)
    interpret(f, data, data)  # y is x: every step reads the previous step's write
    np.testing.assert_array_equal(data, np.arange(6, dtype=np.float32))


def test_store_cast_to_integer_buffer(chunking):
    x, y = Buffer("x", [5]), Buffer("y", [5], "int8")
    f = PrimFunc([x, y], loop1(5, lambda i: BufferStore(y, x[i] * 10.0, [i])))
    out = run_all_ways(f, np.array([0.15, -0.25, 1.29, 2.0, -3.3], np.float32), np.zeros(5, np.int8))[1]
    np.testing.assert_array_equal(out, [1, -2, 12, 20, -33])


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_generated_funcs_with_tiny_chunks(data):
    gen = data.draw(prim_funcs(), label="gen")
    sizes = data.draw(sym_sizes(gen, max_value=7), label="sizes")
    arrays = make_inputs(gen, np.random.default_rng(0), sizes)
    expected = gen.numpy_fn(*arrays[:gen.num_inputs])
    saved = nest.CHUNK_LANES
    nest.CHUNK_LANES = 3
    try:
        interpret(gen.func, *arrays)
    finally:
        nest.CHUNK_LANES = saved
    for got, want in zip(arrays[gen.num_inputs:], expected):
        np.testing.assert_allclose(got, want, equal_nan=True, **tolerance(gen.dtype))


@pytest.mark.slow
def test_large_matmul_is_fast():
    import time
    import benchmarks.bench_interpreter as bench
    f = bench.matmul_func()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 256), np.float32), rng.standard_normal((256, 256), np.float32)
    c = np.zeros((256, 256), np.float32)
    start = time.perf_counter()
    interpret(f, a, b, c)
    assert time.perf_counter() - start < 1.0
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def count_serial_iterations(monkeypatch):
    from tensorir.interpreter.executor import Executor
    calls = []
    original = Executor.run_serial

    def counting(self, loop, start, count):
        calls.append(loop.loop_var.name)
        return original(self, loop, start, count)
    monkeypatch.setattr(Executor, "run_serial", counting)
    return calls


def test_independent_nests_run_without_serial_loops(monkeypatch):
    import benchmarks.bench_interpreter as bench
    calls = count_serial_iterations(monkeypatch)
    x = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    y = np.zeros_like(x)
    interpret(bench.softmax_func(), x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert calls == []


def test_loop_carried_dependence_runs_the_outer_loop_serially(monkeypatch):
    calls = count_serial_iterations(monkeypatch)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3)
    yv = np.zeros_like(xv)
    interpret(row_recurrence_func(), xv, yv)
    np.testing.assert_array_equal(yv, np.cumsum(xv, axis=0))
    assert calls == ["i"]  # rows serial, each row's columns vectorised


def test_zero_extent_runs_nothing():
    n = size_var("n")
    x = Buffer("x", [n])
    f = PrimFunc([x], loop1(n, lambda i: BufferStore(x, 1.0, [i])))
    interpret(f, np.zeros(0, np.float32))
    interpret(f, np.zeros(0, np.float32), vectorize=False)


def test_reduce_iter_var_bound_to_a_constant_runs_vectorised(monkeypatch, chunking):
    # Regression: after fuse(i, k) with extent(k) == 1 the block reads
    # ``vk = T.axis.reduce(1, 0)``; the init lanes were a scalar, and storing the init
    # raised "IndexError: arrays used as indices must be of integer (or boolean) type".
    import tensorir as tir
    f = tir.from_source('''
@T.prim_func
def row_sum(A: T.Buffer((8, 1), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 1):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
''')
    sch = tir.Schedule(f)
    sch.fuse(*sch.get_loops(sch.get_block("B")))
    (iv_k,) = [r for r in tir.collect(sch.func.body, lambda n: isinstance(n, BlockRealize))
               if r.block.name == "B"][0].iter_values[1:]
    assert E.is_const_int(iv_k, 0)  # the case under test: a constant binding
    a = np.arange(8, dtype=np.float32).reshape(8, 1)
    (out,) = run_all_ways(sch.func, a, np.full(8, 5.0, np.float32))[1:]
    np.testing.assert_array_equal(out, a[:, 0])  # init ran: the 5.0s are gone
    calls = count_serial_iterations(monkeypatch)
    interpret(sch.func, a, np.full(8, 5.0, np.float32))
    assert calls == []  # the vectorised path, not a serial fallback
