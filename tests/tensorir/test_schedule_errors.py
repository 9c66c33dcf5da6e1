"""Every precondition failure raises ScheduleError naming the block/loop and why,
and leaves the function (and the trace) exactly as before."""
from __future__ import annotations

import pytest

import tensorir as tir
from tensorir import T, prim_func
from tests.tensorir.test_schedule_primitives import chain, matmul, row_sum


@prim_func
def two_writers(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32")):
    t = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("W1"):
            vi = T.axis.remap("S", [i])
            t[vi] = x[vi]
    for i in range(8):
        with T.block("W2"):
            vi = T.axis.remap("S", [i])
            t[vi] = t[vi] + x[vi]
    for i in range(8):
        with T.block("R"):
            vi = T.axis.remap("S", [i])
            y[vi] = t[vi]


@prim_func
def halved(x: T.Buffer((9,), "float32"), y: T.Buffer((8,), "float32")):
    t = T.alloc_buffer((9,), "float32")
    for i in range(9):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            t[vi] = x[vi]
    for i in range(8):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            y[vi] = t[vi // 2]


@prim_func
def output_then_use(x: T.Buffer((8,), "float32"), y: T.Buffer((8,), "float32"),
                    z: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            y[vi] = x[vi]
    for i in range(8):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            z[vi] = y[vi]


@prim_func
def partial_producer(x: T.Buffer((9,), "float32"), y: T.Buffer((9,), "float32")):
    t = T.alloc_buffer((9,), "float32")
    for i in range(8):
        with T.block("P"):
            vi = T.axis.spatial(8, i)
            t[vi] = x[vi]
    for i in range(9):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            y[vi] = t[vi]


def _loops(sch, name):
    return sch.get_loops(sch.get_block(name))


CASES = [
    # (id, function, action, message fragment)
    ("split-two-none", matmul, lambda s: s.split(_loops(s, "C")[0], [None, None]), "at most one factor"),
    ("split-short", matmul, lambda s: s.split(_loops(s, "C")[1], [2, 2]), "does not cover"),
    ("split-nonpositive", matmul, lambda s: s.split(_loops(s, "C")[1], [None, 0]), "positive"),
    ("fuse-not-nested", chain, lambda s: s.fuse(_loops(s, "B")[0], _loops(s, "C")[1]), "not the only"),
    ("reorder-not-chain", chain, lambda s: s.reorder(_loops(s, "B")[0], _loops(s, "C")[0]), "not in one"),
    ("reorder-dup", matmul, lambda s: s.reorder(*[_loops(s, "C")[0]] * 2), "twice"),
    ("parallel-reduce", matmul, lambda s: s.parallel(_loops(s, "C")[2]), "reduction iter var"),
    ("vectorize-reduce", row_sum, lambda s: s.vectorize(_loops(s, "S")[1]), "reduction iter var"),
    ("bind-bad-axis", matmul, lambda s: s.bind(_loops(s, "C")[0], "warp.x"), "unknown thread axis"),
    ("annotate-bad-value", matmul, lambda s: s.annotate(s.get_block("C"), "k", object()), "annotation value"),
    ("unannotate-missing", matmul, lambda s: s.unannotate(s.get_block("C"), "nope"), "no annotation"),
    ("get-block-missing", matmul, lambda s: s.get_block("nope"), "no block named"),
    ("stale-loop", matmul, lambda s: (lambda l: (s.split(l, [None, 2]), s.parallel(l)))(_loops(s, "C")[0]),
     "no longer exists"),
    ("compute-at-output", chain, lambda s: s.compute_at(s.get_block("C"), _loops(s, "B")[0]), "comes before"),
    ("compute-at-inside", chain, lambda s: s.compute_at(s.get_block("B"), _loops(s, "B")[0]), "already inside"),
    ("compute-at-writes-param", output_then_use,
     lambda s: s.compute_at(s.get_block("P"), _loops(s, "Q")[0]), "function output"),
    ("reverse-compute-at-reduce", row_sum, lambda s: s.reverse_compute_at(s.get_block("S"), _loops(s, "S")[0]),
     "reduction iter vars"),
    ("reverse-compute-at-before", chain,
     lambda s: s.reverse_compute_at(s.get_block("B"), _loops(s, "C")[0]), "comes after"),
    ("reverse-compute-at-cover", partial_producer,
     lambda s: s.reverse_compute_at(s.get_block("Q"), _loops(s, "P")[0]), "does not cover"),
    ("reverse-compute-at-reduce-loop", row_sum,
     lambda s: s.reverse_compute_at(s.cache_write(s.get_block("S"), 0, "local"), _loops(s, "S")[1]),
     "reduction of producer"),
    ("compute-at-other-writer", two_writers,
     lambda s: s.compute_at(s.get_block("W1"), _loops(s, "R")[0]), "not under the loop"),
    ("inline-output", chain, lambda s: s.compute_inline(s.get_block("C")), "function output"),
    ("inline-reduction", matmul, lambda s: s.compute_inline(s.get_block("C")), "reduction block"),
    ("inline-two-writers", two_writers, lambda s: s.compute_inline(s.get_block("W1")), "also writes"),
    ("reverse-inline-two-producers", two_writers,
     lambda s: s.reverse_compute_inline(s.get_block("R")), "exactly one intermediate"),
    ("reverse-inline-non-injective-read", halved,
     lambda s: s.reverse_compute_inline(s.get_block("Q")), "without the other half"),
    ("cache-read-index", matmul, lambda s: s.cache_read(s.get_block("C"), 7, "local"), "out of range"),
    ("cache-read-own-output", two_writers, lambda s: s.cache_read(s.get_block("W2"), 0, "local"),
     "also writes"),
    ("cache-write-two-writers", two_writers, lambda s: s.cache_write(s.get_block("W1"), 0, "local"),
     "another block also writes"),
    ("cache-bad-scope", matmul, lambda s: s.cache_write(s.get_block("C"), 0, ""), "scope"),
    ("set-scope-param", chain, lambda s: s.set_scope(s.get_block("C"), 0, "shared"), "parameter"),
    ("storage-align-axis", chain, lambda s: s.storage_align(s.get_block("B"), 0, 5, 8, 0), "axis"),
    ("storage-align-offset", chain, lambda s: s.storage_align(s.get_block("B"), 0, 0, 8, 8), "offset"),
    ("decompose-no-init", chain, lambda s: s.decompose_reduction(s.get_block("B"), _loops(s, "B")[0]),
     "no init"),
    ("decompose-outer-reduce", matmul,
     lambda s: (s.reorder(*_loops(s, "C")[::-1]), s.decompose_reduction(s.get_block("C"), _loops(s, "C")[2])),
     "iterates the reduction"),
    ("decompose-not-enclosing", chain,
     lambda s: s.decompose_reduction(s.get_block("B"), _loops(s, "C")[0]), "no init"),
    ("rfactor-spatial", row_sum, lambda s: s.rfactor(_loops(s, "S")[0], 0), "only reduction"),
    ("rfactor-not-reduction", chain, lambda s: s.rfactor(_loops(s, "B")[0], 0), "single-store reduction"),
    ("rfactor-axis", row_sum, lambda s: s.rfactor(_loops(s, "S")[1], 5), "factor_axis"),
    ("rfactor-predicate", row_sum,
     lambda s: s.rfactor(s.split(_loops(s, "S")[1], [None, 5])[1], 0), "predicate"),
    ("blockize-mixed", matmul,
     lambda s: (lambda l: s.blockize(s.split(s.fuse(l[1], l[2]), [None, 2])[1]))(_loops(s, "C")),
     "both spatial and reduction"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_precondition_failure_leaves_function_unchanged(case):
    _, func, action, fragment = case
    sch = tir.Schedule(func)
    snapshot = {}

    class Recorder:
        """Record the state just before the failing primitive (earlier steps may succeed)."""

        def __getattr__(self, name):
            method = getattr(sch, name)

            def call(*args):
                snapshot["func"], snapshot["trace"] = sch.func, str(sch.trace)
                return method(*args)
            return call
    with pytest.raises(tir.ScheduleError, match=fragment):
        action(Recorder())
    tir.assert_structural_equal(sch.func, snapshot["func"])
    assert sch.func is snapshot["func"]
    assert str(sch.trace) == snapshot["trace"]


def test_schedule_error_is_value_error_and_names_the_block():
    sch = tir.Schedule(chain)
    with pytest.raises(ValueError, match="block 'C'"):
        sch.compute_inline(sch.get_block("C"))


def test_handles_from_another_schedule_are_rejected():
    other = tir.Schedule(chain)
    block = other.get_block("B")
    loop = other.get_loops(block)[0]
    sch = tir.Schedule(chain)
    with pytest.raises(tir.ScheduleError, match="loop handle"):
        sch.parallel(loop)
    with pytest.raises(tir.ScheduleError, match="block handle"):
        sch.compute_inline(object())
