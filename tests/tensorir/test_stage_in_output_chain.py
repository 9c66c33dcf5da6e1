"""A chain of intermediates staged one after the other in the output row
(tensorir/schedule_rules/stage_in_output.py): softmax(layer_norm(x) * c) keeps the
scaled row and the exp row in the output, computes exp once and allocates no
full-size buffer; chains whose stages read each other at other elements are not
merged."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from backends.target import build_kernels
from tensorir import FloatImm, call_intrin, size_var
from tensorir.compute import compute, create_prim_func, placeholder, reduce_axis, reduce_max, reduce_sum
from tensorir.expr import Call, IntImm
from tensorir.functor import collect
from tensorir.schedule_rules import default_cpu_schedule
from tensorir.schedule_rules.stage_in_output import find_output_stageable
from tensorir.transform import lower
from tests.relaxscript.fuse_helpers import norm_scale_softmax_source

HYPOTHESIS = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALE, EPS = 0.125, 1e-5


def _f(value: float) -> FloatImm:
    return FloatImm(value, "float32")


def norm_scale_softmax_func(width: int, final_adds_scaled: bool = False):
    """softmax(layer_norm(x) * 0.125) over rows, as legalization writes it; with
    ``final_adds_scaled`` the last stage also reads the scaled row (out = softmax + scaled)."""
    n = size_var("n")
    x = placeholder((n, width), "float32", "x")
    gamma, beta = placeholder((width,), "float32", "gamma"), placeholder((width,), "float32", "beta")
    k1, k2, k3, k4 = (reduce_axis(width, f"k{i}") for i in range(1, 5))
    total = compute((n,), lambda i: reduce_sum(x[i, k1], [k1]), "total")
    mean = compute((n,), lambda i: total[i] * _f(1.0 / width), "mean")
    sq = compute((n,), lambda i: reduce_sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]), [k2]), "sq")
    rstd = compute((n,), lambda i: call_intrin("rsqrt", sq[i] * _f(1.0 / width) + _f(EPS)), "rstd")
    normed = compute((n, width), lambda i, j: (x[i, j] - mean[i]) * rstd[i] * gamma[j] + beta[j], "normed")
    scaled = compute((n, width), lambda i, j: normed[i, j] * _f(SCALE), "scaled")
    row_max = compute((n,), lambda i: reduce_max(scaled[i, k3], [k3]), "row_max")
    e = compute((n, width), lambda i, j: call_intrin("exp", scaled[i, j] - row_max[i]), "e")
    e_sum = compute((n,), lambda i: reduce_sum(e[i, k4], [k4]), "e_sum")
    if final_adds_scaled:
        out = compute((n, width), lambda i, j: e[i, j] / e_sum[i] + scaled[i, j], "out")
    else:
        out = compute((n, width), lambda i, j: e[i, j] / e_sum[i], "out")
    return create_prim_func([x, gamma, beta, out], name="norm_scale_softmax")


def norm_scale_softmax_numpy(x, gamma, beta, final_adds_scaled: bool = False):
    x64 = x.astype("float64")
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    scaled = ((x64 - mean) / np.sqrt(var + EPS) * gamma + beta) * SCALE
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    out = e / e.sum(axis=-1, keepdims=True)
    return (out + scaled if final_adds_scaled else out).astype("float32")


def _exp_calls(func) -> int:
    return len(collect(func.body, lambda n: isinstance(n, Call) and n.op == "exp"))


def _row_sized_allocs(func, width: int) -> list:
    # (an IntImm does not compare equal to an int: compare values)
    return [b for b in func.root_block.alloc_buffers
            if len(b.shape) == 2 and isinstance(b.shape[1], IntImm) and b.shape[1].value == width]


def _inputs(rng, n: int, width: int) -> list:
    return [(rng.standard_normal((n, width)) * 2).astype("float32"),
            (1 + 0.1 * rng.standard_normal(width)).astype("float32"),
            (0.1 * rng.standard_normal(width)).astype("float32")]


# ---------------------------------------------------------------- the whole chain
def test_both_intermediates_of_the_chain_are_staged_in_order():
    func = norm_scale_softmax_func(32)
    mids, out = find_output_stageable(func)
    assert [m.name for m in mids] == ["scaled", "e"]
    assert out is func.buffer_params[-1]


@functools.lru_cache(maxsize=None)
def _scheduled(width: int, final_adds_scaled: bool = False):
    scheduled = default_cpu_schedule(norm_scale_softmax_func(width, final_adds_scaled))
    return scheduled, build_kernels("c", scheduled)["norm_scale_softmax"]


@pytest.mark.parametrize("width", [16, 64])
def test_scheduled_chain_allocates_no_row_sized_buffer_and_computes_exp_once(width):
    scheduled, _ = _scheduled(width)
    unscheduled = norm_scale_softmax_func(width)
    assert len(_row_sized_allocs(unscheduled, width)) == 3  # normed, scaled, e
    assert _row_sized_allocs(scheduled, width) == []
    assert _exp_calls(scheduled) == 1
    out = scheduled.buffer_params[-1]
    writers = collect(scheduled.body, lambda n: isinstance(n, tir.Block) and any(w.buffer is out for w in n.writes))
    assert sorted(w.name for w in writers) == ["e", "out", "scaled"]
    # lowering keeps it so: only per-row scalars are allocated
    lowered = lower(scheduled)
    allocs = collect(lowered.body, lambda n: isinstance(n, tir.Allocate))
    (n,) = {b.shape[0] for b in scheduled.buffer_params if len(b.shape) == 2}
    assert len(allocs) == 4 and all(a.buffer.shape == (n,) for a in allocs)  # 4 row statistics


def _assert_interpreter_and_c_give(want, scheduled, kernel, *inputs):
    for run in (lambda *args: tir.interpret(scheduled, *args), kernel):
        got = np.full_like(want, np.nan)
        run(*inputs, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@HYPOTHESIS
@given(width=st.sampled_from([16, 64]), n=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_staged_chain_matches_numpy_in_interpreter_and_c(width, n, seed):
    scheduled, kernel = _scheduled(width)
    x, gamma, beta = _inputs(np.random.default_rng(seed), n, width)
    want = norm_scale_softmax_numpy(x, gamma, beta)
    _assert_interpreter_and_c_give(want, scheduled, kernel, x, gamma, beta)


# ---------------------------------------------------------------- part of a chain
def test_intermediate_still_read_by_the_last_stage_stops_the_chain():
    """The final stage reads the scaled row too: exp may not overwrite it, so the two rows can
    not share the output. Staging the scaled row would leave exp to be inlined (reading the
    staged row from a later stage), so only the exp row is staged."""
    func = norm_scale_softmax_func(16, final_adds_scaled=True)
    mids, _ = find_output_stageable(func)
    assert [m.name for m in mids] == ["e"]
    scheduled, kernel = _scheduled(16, final_adds_scaled=True)
    rng = np.random.default_rng(11)
    for n in (1, 4):
        x, gamma, beta = _inputs(rng, n, 16)
        want = norm_scale_softmax_numpy(x, gamma, beta, final_adds_scaled=True)
        _assert_interpreter_and_c_give(want, scheduled, kernel, x, gamma, beta)


def _reversed_chain(width: int):
    """a = exp(x) (read by a max and by b); b = exp(a reversed - max) (read by a sum and out)."""
    n = size_var("n")
    x = placeholder((n, width), "float32", "x")
    k1, k2 = reduce_axis(width, "k1"), reduce_axis(width, "k2")
    a = compute((n, width), lambda i, j: call_intrin("exp", x[i, j]), "a")
    a_max = compute((n,), lambda i: reduce_max(a[i, k1], [k1]), "a_max")
    b = compute((n, width), lambda i, j: call_intrin("exp", a[i, width - 1 - j] - a_max[i]), "b")
    b_sum = compute((n,), lambda i: reduce_sum(b[i, k2], [k2]), "b_sum")
    out = compute((n, width), lambda i, j: b[i, j] / b_sum[i], "out")
    return create_prim_func([x, out], name="reversed_chain")


def _reversed_chain_numpy(x):
    a = np.exp(x.astype("float64"))
    b = np.exp(a[:, ::-1] - a.max(axis=-1, keepdims=True))
    return (b / b.sum(axis=-1, keepdims=True)).astype("float32")


def test_second_stage_reading_the_first_at_another_element_is_not_staged():
    # b reads a at another element, so they can not share the output; staging a would leave b to be
    # inlined into the final stage (reading the staged row out of order): only b may be staged
    staged = find_output_stageable(_reversed_chain(32))
    names = [m.name for m in staged[0]] if staged else []
    assert "a" not in names


def test_reversed_chain_keeps_its_results():
    # regression: `a` was staged in the output, the unstaged `b` (which reads a reversed) was then
    # inlined into the final stage, which read out[i, W-1-j] while overwriting out[i, j] in place
    scheduled = default_cpu_schedule(_reversed_chain(32))
    x = np.random.default_rng(3).standard_normal((3, 32)).astype("float32")
    got = np.full_like(x, np.nan)
    tir.interpret(scheduled, x, got)
    np.testing.assert_allclose(got, _reversed_chain_numpy(x), rtol=1e-5, atol=1e-7)


def test_reversed_chain_unscheduled_reference_is_right():
    """The reference the test above compares against (so it fails for the right reason)."""
    func = _reversed_chain(32)
    x = np.random.default_rng(3).standard_normal((3, 32)).astype("float32")
    got = np.full_like(x, np.nan)
    tir.interpret(func, x, got)
    np.testing.assert_allclose(got, _reversed_chain_numpy(x), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- through relaxscript
NORM_SCALE_SOFTMAX = norm_scale_softmax_source(64)


@functools.lru_cache(maxsize=None)
def _relax_kernel_func():
    legal = rx.transform.AnnotateTIROpPattern()(rx.transform.LegalizeOps()(rx.from_source(NORM_SCALE_SOFTMAX)))
    fused = rx.transform.FuseTIR()(rx.transform.FuseOps()(legal))
    (name,) = [name for name in fused.functions if name != "main"]
    return fused[name]


@functools.lru_cache(maxsize=None)
def _relax_vm():
    return rx.VirtualMachine(rx.build(rx.from_source(NORM_SCALE_SOFTMAX), target="c"))["main"]


def test_fused_relax_kernel_stages_the_scaled_and_exp_rows():
    func = _relax_kernel_func()
    mids, out = find_output_stageable(func)
    assert len(mids) == 2 and out is func.buffer_params[-1]
    assert all(len(m.shape) == 2 for m in mids)
    scheduled = default_cpu_schedule(func)
    assert _row_sized_allocs(scheduled, 64) == []
    assert _exp_calls(scheduled) == 1


@HYPOTHESIS
@given(n=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_relax_build_of_the_chain_matches_numpy(n, seed):
    x, gamma, beta = _inputs(np.random.default_rng(seed), n, 64)
    got = np.asarray(_relax_vm()(x, gamma, beta))
    np.testing.assert_allclose(got, norm_scale_softmax_numpy(x, gamma, beta), rtol=1e-4, atol=1e-6)
