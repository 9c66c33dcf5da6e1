"""Default GPU schedules (tensorir/schedule_rules/gpu/) keep results: random
generated functions and model-shaped kernels, scheduled by the GPU rules,
compute under the interpreter (which runs bound loops as ordinary loops)
what the unscheduled function computes, for several values of each
symbolic var (n = 1 and extents the thread counts do not divide). Also:
which rule each kernel gets, the shape of the schedules, the print/parse
round trip of bound schedules, and the DefaultGPUSchedule pass."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir import size_var
from tensorir.compute import compute, create_prim_func, placeholder, reduce_axis, reduce_sum
from tensorir.schedule_rules import SCHEDULED_ATTR
from tensorir.schedule_rules.gpu import GPU_RULE_ATTR, default_gpu_schedule, gpu_rules_for
from tests.tensorir.generators import (CONTROL_KINDS, DTYPES, INT_DTYPES, make_inputs, prim_funcs, shape_of,
                                      tolerance)
from tests.tensorir.test_schedule_rules_kernels import KERNELS, layer_norm_func, softmax_func
from tests.tensorir.test_schedule_util import assert_roundtrip

# 256 threads per block for symbolic extents, 32..256 for constant rows: 257 and 33 leave remainders
SYM_VALUES = (1, 3, 33, 257)
MAX_ELEMENTS = 40_000  # keep the interpreter fast


def _interpret(func, arrays, num_inputs):
    copies = [a.copy() for a in arrays]
    tir.interpret(func, *copies)
    return copies[num_inputs:]


def _thread_tags(func) -> list[str]:
    return [f.thread_tag for f in tir.collect(func.body, lambda n: isinstance(n, tir.For))
            if f.kind == "thread_binding"]


def _reordered_tolerance(dtype: str) -> dict:
    # Thread-split reductions add in another order than the serial loop: a float32 sum of a few
    # hundred terms differs in the last 4-5 bits (5.8e-5 relative was seen over 257 terms).
    if dtype == "float32":
        return {"rtol": 2e-4, "atol": 2e-5}
    return tolerance(dtype)


def _check_scheduled(gen, data, roundtrip=True):
    scheduled = default_gpu_schedule(gen.func)
    assert scheduled.attrs[SCHEDULED_ATTR] is True
    assert scheduled.attrs[GPU_RULE_ATTR] in {r.name for r in gpu_rules_for(gen.func)}
    if roundtrip:
        assert_roundtrip(scheduled)
    rng = np.random.default_rng(0)
    names = [v.name for v in gen.sym_vars]
    size_lists = data.draw(st.lists(st.fixed_dictionaries({n: st.sampled_from(SYM_VALUES) for n in names}),
                                    min_size=2, max_size=3))
    checked = 0
    for sizes in size_lists:
        if not all(np.prod(shape_of(b, sizes)) <= MAX_ELEMENTS for b in gen.func.buffer_params):
            continue
        arrays = make_inputs(gen, rng, sizes)
        expected = _interpret(gen.func, arrays, gen.num_inputs)
        for got, want in zip(_interpret(scheduled, arrays, gen.num_inputs), expected):
            np.testing.assert_allclose(got, want, **_reordered_tolerance(gen.dtype), err_msg=f"{sizes}")
        checked += 1
    assert checked or gen.sym_vars


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_gpu_scheduled_functions_match_interpreter(data):
    _check_scheduled(data.draw(prim_funcs()), data)


BRANCHING = prim_funcs(kinds=CONTROL_KINDS, dtypes=DTYPES + INT_DTYPES)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_gpu_scheduled_branching_functions_match_interpreter(data):
    # no round trip: the branching generator leaves literal arithmetic (5 // -5) the parser folds
    _check_scheduled(data.draw(BRANCHING), data, roundtrip=False)


@pytest.mark.fuzz
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_gpu_scheduled_functions_match_interpreter_fuzz(data):
    _check_scheduled(data.draw(st.one_of(prim_funcs(), BRANCHING)), data, roundtrip=False)


# ------------------------------------------------------------------ model-shaped kernels
EXPECTED_RULE = {"add_gelu": "injective", "softmax": "row_reduction", "layer_norm": "row_reduction",
                 "matmul": "matmul", "matmul_bias": "matmul"}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("width", [80, 128])
def test_model_kernels_take_their_rule_and_match_numpy(name, width):
    build, make_args, reference = KERNELS[name]
    scheduled = default_gpu_schedule(build(width))
    assert scheduled.attrs[GPU_RULE_ATTR] == EXPECTED_RULE[name]
    assert "threadIdx.x" in _thread_tags(scheduled) and "blockIdx.x" in _thread_tags(scheduled)
    rng = np.random.default_rng(0)
    for n in (1, 5, 33):
        args = [a.astype(np.float32) for a in make_args(rng, n, width)]
        want = reference(*args)
        got = np.zeros_like(want)
        tir.interpret(scheduled, *args, got)
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, err_msg=f"n={n}")


def gemv_func(k, m, weight_transposed: bool):
    a = placeholder((1, k), "float32", "a")
    w = placeholder((m, k) if weight_transposed else (k, m), "float32", "w")
    r = reduce_axis(k, "r")
    c = compute((1, m), lambda i, j: reduce_sum(a[i, r] * (w[j, r] if weight_transposed else w[r, j]), [r]),
                "c")
    return create_prim_func([a, w, c], name="gemv")


@pytest.mark.parametrize("weight_transposed", [False, True])
def test_single_row_matmul_takes_the_gemv_rule(weight_transposed):
    func = gemv_func(96, 40, weight_transposed)
    scheduled = default_gpu_schedule(func)
    assert scheduled.attrs[GPU_RULE_ATTR] == "gemv"
    block = tir.collect(scheduled.body, lambda n: isinstance(n, tir.BlockRealize) and n.block.name == "c")[0]
    bound_reduction = any(iv.kind == "R" for iv in block.block.iter_vars) and weight_transposed
    # a k-contiguous weight: the threads split k (a cross-thread reduction); else they take columns
    loops = tir.collect(scheduled.body, lambda n: isinstance(n, tir.For) and n.kind == "thread_binding")
    tx = next(lp for lp in loops if lp.thread_tag == "threadIdx.x")
    assert (tx.extent.value == 128) == bound_reduction
    rng = np.random.default_rng(3)
    a, w = rng.standard_normal((1, 96)).astype("f4"), rng.standard_normal(func.buffer_params[1].shape_tuple
                                                                          if False else
                                                                          ((40, 96) if weight_transposed
                                                                           else (96, 40))).astype("f4")
    got = np.zeros((1, 40), "f4")
    tir.interpret(scheduled, a, w, got)
    np.testing.assert_allclose(got, a @ (w.T if weight_transposed else w), rtol=2e-4, atol=2e-5)


def test_matmul_with_rows_does_not_take_gemv():
    from tests.tensorir.test_schedule_rules_kernels import matmul_func
    assert default_gpu_schedule(matmul_func(48, 40)).attrs[GPU_RULE_ATTR] != "gemv"


def stitched_norm_softmax(width: int):
    """softmax(layer_norm(x) * 0.5): BladeDISC's stitched pattern."""
    n = size_var("n")
    x = placeholder((n, width), "float32", "x")
    k1, k2, k3, k4 = (reduce_axis(width, f"k{i}") for i in range(4))
    total = compute((n,), lambda i: reduce_sum(x[i, k1], [k1]), "total")
    mean = compute((n,), lambda i: total[i] * (1.0 / width), "mean")
    sq = compute((n,), lambda i: reduce_sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]), [k2]), "sq")
    norm = compute((n, width), lambda i, j: (x[i, j] - mean[i]) * tir.call_intrin(
        "rsqrt", sq[i] * (1.0 / width) + 1e-5) * 0.5, "norm")
    from tensorir.compute import reduce_max
    row_max = compute((n,), lambda i: reduce_max(norm[i, k3], [k3]), "row_max")
    e = compute((n, width), lambda i, j: tir.call_intrin("exp", norm[i, j] - row_max[i]), "e")
    s = compute((n,), lambda i: reduce_sum(e[i, k4], [k4]), "s")
    out = compute((n, width), lambda i, j: e[i, j] / s[i], "out")
    return create_prim_func([x, out], name="norm_softmax")


def _norm_softmax_numpy(x):
    mean = x.mean(-1, keepdims=True)
    norm = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * 0.5
    e = np.exp(norm - norm.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("width", [64, 100])
def test_stitched_norm_softmax_stays_one_kernel(width):
    scheduled = default_gpu_schedule(stitched_norm_softmax(width))
    assert scheduled.attrs[GPU_RULE_ATTR] == "row_reduction"
    # one kernel: a single blockIdx loop at the root holds every stage
    block_loops = [f for f in tir.collect(scheduled.body, lambda n: isinstance(n, tir.For))
                   if f.thread_tag == "blockIdx.x"]
    assert len(block_loops) == 1
    stages = tir.collect(block_loops[0], lambda n: isinstance(n, tir.Block))
    assert {b.name for b in stages} >= {"total", "sq", "row_max", "s", "out"}
    shared = [b for b in scheduled.root_block.alloc_buffers if b.scope == "shared"]
    assert {b.name for b in shared} == {"total", "sq", "row_max", "s"}
    rng = np.random.default_rng(1)
    for n in (1, 3, 9):
        x = rng.standard_normal((n, width)).astype("f4") * 3
        got = np.zeros_like(x)
        tir.interpret(scheduled, x, got)
        np.testing.assert_allclose(got, _norm_softmax_numpy(x), rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize("build", [softmax_func, layer_norm_func])
def test_row_reductions_bind_the_reduction_loop_to_threads(build):
    scheduled = default_gpu_schedule(build(300))
    for realize in tir.collect(scheduled.body, lambda n: isinstance(n, tir.BlockRealize)):
        if any(iv.kind == "R" for iv in realize.block.iter_vars):
            # a cross-thread reduction: the block's reduce binding reads a threadIdx.x loop var
            tx = [f for f in tir.collect(scheduled.body, lambda n: isinstance(n, tir.For))
                  if f.thread_tag == "threadIdx.x"
                  and tir.collect(f, lambda n, realize=realize: n is realize)]
            assert tx and tx[0].extent.value == 256
            reduce_binding = realize.iter_values[[iv.kind for iv in realize.block.iter_vars].index("R")]
            loop_var = tx[0].loop_var
            assert tir.collect(reduce_binding, lambda n, loop_var=loop_var: n is loop_var)


def test_full_reduction_falls_back_and_stays_correct():
    n = size_var("n")
    x = placeholder((n,), "float32", "x")
    r = reduce_axis(n, "r")
    total = compute((), lambda: reduce_sum(x[r], [r]), "total")
    func = create_prim_func([x, total], name="full_sum")
    assert [r.name for r in gpu_rules_for(func)] == ["row_reduction", "fallback"]
    scheduled = default_gpu_schedule(func)
    assert scheduled.attrs[GPU_RULE_ATTR] == "fallback"
    assert _thread_tags(scheduled) == []  # left for the lowering's single-thread launch
    x_value = np.arange(5, dtype="f4")
    got = np.zeros((), "f4")
    tir.interpret(scheduled, x_value, got)
    assert got == 10.0


def test_already_scheduled_and_blockless_functions_are_left_alone():
    func = softmax_func(32).with_attr(SCHEDULED_ATTR, True)
    assert default_gpu_schedule(func) is func
    lowered = tir.lower(softmax_func(32))
    assert default_gpu_schedule(lowered) is lowered
    with pytest.raises(TypeError, match="PrimFunc"):
        default_gpu_schedule("not a function")


def test_default_gpu_schedule_pass_schedules_unmarked_functions_and_reports_rules():
    import relaxscript as rx
    from relaxscript.irmodule import IRModule
    marked = softmax_func(32).with_attr(SCHEDULED_ATTR, True)
    mod = IRModule({"sm": softmax_func(64), "gelu": KERNELS["add_gelu"][0](64), "hand": marked})
    schedule = rx.transform.DefaultGPUSchedule()
    out = schedule(mod)
    assert out["hand"] is marked
    assert schedule.last_report == {"row_reduction": ["sm"], "injective": ["gelu"]}
    assert rx.transform.gpu_schedule_report(out) == {"row_reduction": 1, "injective": 1, "hand": 1}
    assert schedule(out) is out and schedule.last_report == {}


def test_a_reduction_loop_binds_to_threads_only():
    from tensorir.errors import ScheduleError
    from tests.tensorir.test_schedule_rules_kernels import matmul_func
    sch = tir.Schedule(matmul_func(8, 4))
    i, j, k = sch.get_loops(sch.get_block("c"))
    with pytest.raises(ScheduleError, match="would race"):
        sch.bind(k, "blockIdx.x")
    sch.bind(k, "threadIdx.x")  # a cross-thread reduction
    assert _thread_tags(sch.func) == ["threadIdx.x"]


def test_batched_softmax_rows_span_two_loops():
    """softmax over the last axis of (8, n, n): two row loops fused on blockIdx.x."""
    n = size_var("n")
    x = placeholder((8, n, n), "float32", "x")
    from tensorir.compute import reduce_max
    k1, k2 = reduce_axis(n, "k1"), reduce_axis(n, "k2")
    row_max = compute((8, n), lambda b, i: reduce_max(x[b, i, k1], [k1]), "row_max")
    total = compute((8, n), lambda b, i: reduce_sum(tir.call_intrin("exp", x[b, i, k2] - row_max[b, i]), [k2]),
                    "total")
    out = compute((8, n, n), lambda b, i, j: tir.call_intrin("exp", x[b, i, j] - row_max[b, i]) / total[b, i],
                  "out")
    scheduled = default_gpu_schedule(create_prim_func([x, out], name="softmax3"))
    assert scheduled.attrs[GPU_RULE_ATTR] == "row_reduction"
    assert _thread_tags(scheduled).count("blockIdx.x") == 1
    rng = np.random.default_rng(2)
    for size in (1, 3, 40):
        x_value = rng.standard_normal((8, size, size)).astype("f4")
        got = np.zeros_like(x_value)
        tir.interpret(scheduled, x_value, got)
        e = np.exp(x_value - x_value.max(-1, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=2e-4, atol=2e-6)


def _decoder_kernels():
    import relaxscript as rx
    from examples.llama_decoder import TINY, llama_source
    from relaxscript import transform as T
    mod = rx.from_source(llama_source(TINY))
    for step in (T.InlineFunctions(), T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FuseOps(), T.FuseTIR()):
        mod = step(mod)
    return {name: f for name, f in mod.functions.items() if isinstance(f, tir.PrimFunc)}


def test_decoder_kernels_keep_their_results():
    """Every kernel of the demo's (tiny) decoder, as legalization and fusion make it."""
    from tests.tensorir.test_schedule_util import assert_same_results
    kernels = _decoder_kernels()
    rules = {}
    for name, func in kernels.items():
        scheduled = default_gpu_schedule(func)
        rules[name] = scheduled.attrs[GPU_RULE_ATTR]
        sym_names = {v.name for b in func.buffer_params for d in b.shape
                     for v in tir.collect(d, lambda e: isinstance(e, tir.Var))}
        sym_names |= {p.name for p in func.scalar_params}
        sizes = [{s: value for s in sym_names} for value in (1, 5)]
        assert_same_results(func, [scheduled], sizes)  # inputs random, the one output zeroed
    # the rules the decoder needs: matmuls, the norm and softmax rows, the rotary embedding
    assert {"matmul", "row_reduction", "injective"} <= set(rules.values())
    assert rules["rms_norm"] == "row_reduction" and rules["softmax"] == "row_reduction"
