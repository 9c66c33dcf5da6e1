"""Softmax's exp is stored once, in the output row, and normalized in place."""
from __future__ import annotations

import numpy as np

import tensorir as tir
from backends.target import build_kernels
from tensorir import size_var
from tensorir.compute import compute, create_prim_func, placeholder, reduce_axis, reduce_sum
from tensorir.expr import Call
from tensorir.functor import collect
from tensorir.schedule_rules import default_cpu_schedule
from tensorir.schedule_rules.stage_in_output import find_output_stageable
from tests.tensorir.test_schedule_rules_kernels import softmax_func, softmax_numpy


def _exp_calls(func) -> int:
    return len(collect(func.body, lambda n: isinstance(n, Call) and n.op == "exp"))


def test_softmax_exp_is_computed_once_into_the_output():
    func = softmax_func(256)
    out = func.buffer_params[-1]
    scheduled = default_cpu_schedule(func)
    allocs = [b for b in scheduled.root_block.alloc_buffers if len(b.shape) == 2 and getattr(b.shape[1], "value", None) == 256]
    assert allocs == [] and _exp_calls(scheduled) == 1
    writers = collect(scheduled.body, lambda n: isinstance(n, tir.Block) and
                      any(w.buffer is out for w in n.writes))
    assert len(writers) == 2  # exp fills the row, the normalize stage rewrites it


def test_softmax_staged_in_output_matches_numpy_in_interpreter_and_c():
    rng = np.random.default_rng(0)
    scheduled = default_cpu_schedule(softmax_func(64))
    x = (rng.standard_normal((5, 64)) * 4).astype(np.float32)
    got = np.full_like(x, np.nan)
    tir.interpret(scheduled, x, got)
    np.testing.assert_allclose(got, softmax_numpy(x), rtol=1e-5, atol=1e-7)
    got_c = np.full_like(x, np.nan)
    build_kernels("c", scheduled)["softmax"](x, got_c)
    np.testing.assert_allclose(got_c, softmax_numpy(x), rtol=1e-5, atol=1e-7)


def test_intermediate_read_across_rows_is_not_staged():
    n = size_var("n")
    x = placeholder((n, 32), "float32", "x")
    k = reduce_axis(32, "k")
    e = compute((n, 32), lambda i, j: tir.call_intrin("exp", x[i, j]), "e")
    total = compute((n,), lambda i: reduce_sum(e[0, k], [k]), "total")  # always row 0
    out = compute((n, 32), lambda i, j: e[i, j] / total[i], "out")
    assert find_output_stageable(create_prim_func([x, out], name="cross_row")) is None


def test_intermediate_read_by_the_final_stage_only_is_not_staged():
    n = size_var("n")
    x = placeholder((n, 32), "float32", "x")
    k = reduce_axis(32, "k")
    e = compute((n, 32), lambda i, j: tir.call_intrin("exp", x[i, j]), "e")
    total = compute((n,), lambda i: reduce_sum(x[i, k], [k]), "total")
    out = compute((n, 32), lambda i, j: e[i, j] / total[i], "out")
    assert find_output_stageable(create_prim_func([x, out], name="single_reader")) is None
