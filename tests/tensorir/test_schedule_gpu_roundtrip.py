"""GPU schedules at the loop level: thread bindings and "shared"/"local" buffers print, re-parse
to an equal function, replay from their trace and interpret to NumPy's result; binding a
reduction loop is allowed only to threadIdx.* (a cross-thread reduction) and only when the
loop feeds reduce iter vars alone."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir.errors import ScheduleError

MATMUL = '''
@T.prim_func
def mm(A: T.Buffer(("n", "k"), "float32"), B: T.Buffer(("k", "m"), "float32"),
       C: T.Buffer(("n", "m"), "float32")):
    n = T.int64()
    k = T.int64()
    m = T.int64()
    for i, j, r in T.grid(n, m, k):
        with T.block("C"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]
'''


def _shared_tiles(sch):
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 4])
    bj, tj = sch.split(j, [None, 4])
    ko, _ = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ko, ti, tj)
    for loop, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        sch.bind(loop, tag)
    cached = sch.cache_read(block, 1, "shared")
    sch.compute_at(cached, ko)
    rows, cols = sch.get_loops(cached)[-2:]
    sch.bind(rows, "threadIdx.y")
    sch.bind(cols, "threadIdx.x")


def _cross_thread(sch):
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.bind(sch.fuse(i, j), "blockIdx.x")
    _, inner = sch.split(k, [None, 8])
    sch.bind(inner, "threadIdx.x")


def _local_accumulator(sch):
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(bi, ti, jo, k, ji)
    sch.bind(bi, "blockIdx.x")
    sch.bind(ti, "threadIdx.x")
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), jo)


@pytest.mark.parametrize("schedule", [_shared_tiles, _cross_thread, _local_accumulator])
def test_gpu_schedules_round_trip_and_interpret(schedule):
    func = tir.from_source(MATMUL)
    sch = tir.Schedule(func)
    schedule(sch)
    text = tir.print_prim_func(sch.func)
    assert "T.thread_binding(" in text and 'thread="threadIdx.x"' in text
    reparsed = tir.from_source(text)
    tir.assert_structural_equal(reparsed, sch.func)
    assert tir.print_prim_func(reparsed) == text
    replayed = tir.Schedule(func)
    sch.trace.apply_to(replayed)
    tir.assert_structural_equal(replayed.func, sch.func)
    rng = np.random.default_rng(3)
    for n, k, m in [(1, 1, 1), (5, 9, 3), (9, 4, 13)]:
        a, b = rng.uniform(-1, 1, (n, k)).astype("float32"), rng.uniform(-1, 1, (k, m)).astype("float32")
        c = np.zeros((n, m), "float32")
        tir.interpret(sch.func, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


def test_scoped_buffers_print_their_scope():
    sch = tir.Schedule(tir.from_source(MATMUL))
    _shared_tiles(sch)
    assert 'scope="shared"' in tir.print_prim_func(sch.func)
    sch = tir.Schedule(tir.from_source(MATMUL))
    _local_accumulator(sch)
    assert 'scope="local"' in tir.print_prim_func(sch.func)


def test_binding_a_reduction_loop():
    sch = tir.Schedule(tir.from_source(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="reduction iter var.*only a loop feeding reduce iter vars"):
        sch.bind(k, "blockIdx.x")
    with pytest.raises(ScheduleError, match="reduction iter var"):
        sch.parallel(k)
    sch.bind(k, "threadIdx.x")   # a cross-thread reduction
    sch = tir.Schedule(tir.from_source(MATMUL))
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(j, k)       # feeds a spatial and a reduce iter var
    with pytest.raises(ScheduleError, match="reduction iter var"):
        sch.bind(fused, "threadIdx.x")
