"""The schedule trace: printed as Python, executable, and replayable."""
from __future__ import annotations

import tensorir as tir
from tests.tensorir.test_schedule_primitives import chain, matmul, row_sum


def _schedule_matmul(sch):
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, k, ii)
    sch.decompose_reduction(block, k)
    sch.parallel(io)
    return sch


def test_trace_prints_python_calls():
    sch = _schedule_matmul(tir.Schedule(matmul))
    assert str(sch.trace).splitlines() == [
        'b0 = sch.get_block("C")',
        "l1, l2, l3 = sch.get_loops(b0)",
        "l4, l5 = sch.split(l1, [None, 4])",
        "sch.reorder(l4, l2, l3, l5)",
        "b6 = sch.decompose_reduction(b0, l3)",
        "sch.parallel(l4)",
    ]


def test_printed_trace_runs_as_python():
    sch = _schedule_matmul(tir.Schedule(matmul))
    fresh = tir.Schedule(matmul)
    exec(str(sch.trace), {"sch": fresh})  # noqa: S102 - the trace is meant to be run
    tir.assert_structural_equal(fresh.func, sch.func)


def test_apply_to_replays_every_family():
    sch = tir.Schedule(chain)
    b = sch.get_block("B")
    c = sch.get_block("C")
    i, j = sch.get_loops(c)
    sch.split(i, [None, 3])
    sch.compute_at(b, sch.get_loops(c)[0])
    sch.cache_read(c, 1, "local")
    sch.annotate(c, "note", [1, 2])
    sch.storage_align(b, 0, 0, 4, 1)
    fresh = tir.Schedule(chain)
    sch.trace.apply_to(fresh)
    tir.assert_structural_equal(fresh.func, sch.func)
    assert str(fresh.trace) == str(sch.trace)

    red = tir.Schedule(row_sum)
    _, k = red.get_loops(red.get_block("S"))
    _, ki = red.split(k, [None, 4])
    red.rfactor(ki, 0)
    red.blockize(red.get_loops(red.get_block("S"))[1])
    again = tir.Schedule(row_sum)
    red.trace.apply_to(again)
    tir.assert_structural_equal(again.func, red.func)


def test_failed_primitive_is_not_recorded():
    sch = tir.Schedule(chain)
    block = sch.get_block("C")
    before = len(sch.trace)
    try:
        sch.compute_inline(block)
    except tir.ScheduleError:
        pass
    assert len(sch.trace) == before
