"""Default CPU schedules preserve semantics: for random generated functions
(elementwise, broadcast, transpose, reductions, matmul; symbolic and static
extents) and several values of the symbolic vars (including values that the
split factors do not divide), the scheduled function, its lowered form and
its C build compute what ``tensorir.interpret`` computes on the original.
This is the C-vs-interpreter property test of the C backend."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tensorir.schedule_rules import SCHEDULED_ATTR, default_cpu_schedule
from tests.tensorir.generators import (CONTROL_KINDS, DTYPES, INT_DTYPES, make_inputs, prim_funcs, shape_of,
                                      tolerance)

# 64 is the symbolic inner chunk and 4 the GEMM row tile: 66 and 7 leave remainders
SYM_VALUES = (1, 3, 7, 17, 66)
MAX_ELEMENTS = 40_000  # keep the interpreter fast


def _sizes_strategy(gen):
    names = [v.name for v in gen.sym_vars]
    return st.lists(st.fixed_dictionaries({n: st.sampled_from(SYM_VALUES) for n in names}),
                    min_size=2, max_size=3)


def _small_enough(gen, sizes) -> bool:
    return all(np.prod(shape_of(b, sizes)) <= MAX_ELEMENTS for b in gen.func.buffer_params)


def _interpret(func, arrays, num_inputs):
    copies = [a.copy() for a in arrays]
    tir.interpret(func, *copies)
    return copies[num_inputs:]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scheduled_lowered_and_c_results_match_interpreter(data):
    _check_scheduled(data.draw(prim_funcs()), data)


BRANCHING = prim_funcs(kinds=CONTROL_KINDS, dtypes=DTYPES + INT_DTYPES)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scheduled_branching_functions_match_interpreter(data):
    # guards and predicates meet the schedule's split guards and vectorized chunks
    _check_scheduled(data.draw(BRANCHING), data)


@pytest.mark.fuzz
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_scheduled_branching_functions_match_interpreter_fuzz(data):
    _check_scheduled(data.draw(BRANCHING), data)


def _check_scheduled(gen, data):
    scheduled = default_cpu_schedule(gen.func)
    assert scheduled.attrs[SCHEDULED_ATTR] is True
    lowered = tir.lower(scheduled)
    module = build_kernels("c", scheduled)
    rng = np.random.default_rng(0)
    checked = 0
    for sizes in data.draw(_sizes_strategy(gen)):
        if not _small_enough(gen, sizes):
            continue
        arrays = make_inputs(gen, rng, sizes)
        expected = _interpret(gen.func, arrays, gen.num_inputs)
        for candidate in (scheduled, lowered):
            for got, want in zip(_interpret(candidate, arrays, gen.num_inputs), expected):
                np.testing.assert_allclose(got, want, **tolerance(gen.dtype), err_msg=f"{sizes}")
        c_arrays = [a.copy() for a in arrays]
        module[gen.func.name](*c_arrays)
        for got, want in zip(c_arrays[gen.num_inputs:], expected):
            np.testing.assert_allclose(got, want, **tolerance(gen.dtype), err_msg=f"C, {sizes}")
        checked += 1
    assert checked or gen.sym_vars


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_unscheduled_c_build_matches_interpreter(data):
    gen = data.draw(prim_funcs())
    module = build_kernels("c", gen.func)
    rng = np.random.default_rng(1)
    sizes = data.draw(st.fixed_dictionaries({v.name: st.integers(1, 9) for v in gen.sym_vars}))
    arrays = make_inputs(gen, rng, sizes)
    expected = gen.numpy_fn(*arrays[:gen.num_inputs])
    module[gen.func.name](*arrays)
    for got, want in zip(arrays[gen.num_inputs:], expected):
        np.testing.assert_allclose(got, want, **tolerance(gen.dtype))


# ------------------------------------------------------------------ shapes of the schedules
def _loops(func):
    """Loops outermost first (each loop listed before the loops it encloses)."""
    found = []

    def walk(node):
        if isinstance(node, tir.For):
            found.append(node)
        for child in tir.collect(node, lambda n: isinstance(n, tir.For) and n is not node):
            if not any(child is f for f in found) and _directly_under(node, child):
                walk(child)
    walk(func.body)
    return found


def _directly_under(outer, loop) -> bool:
    """``loop`` is inside ``outer`` with no other loop in between."""
    between = tir.collect(outer, lambda n: isinstance(n, tir.For) and n is not outer and n is not loop
                          and any(c is loop for c in tir.collect(n, lambda m: m is loop)))
    return not between


def _elementwise(extent_j):
    from tensorir import call_intrin, size_var
    from tensorir.compute import compute, create_prim_func, placeholder
    n = size_var("n")
    x = placeholder((n, extent_j), "float32", "x")
    t = compute((n, extent_j), lambda i, j: call_intrin("exp", x[i, j]), "t")
    y = compute((n, extent_j), lambda i, j: t[i, j] * 2.0, "y")
    return create_prim_func([x, y], name="exp2x")


def test_elementwise_inlines_fuses_parallel_and_vectorizes_inner_chunk():
    func = default_cpu_schedule(_elementwise(4096))
    loops = _loops(func)
    assert [lp.kind for lp in loops] == ["parallel", "vectorized"]
    assert loops[1].extent.value == 512
    assert len(tir.collect(func.body, lambda n: isinstance(n, tir.Block))) == 2  # root + one stage


def test_short_inner_extent_is_fused_but_not_vectorized():
    func = default_cpu_schedule(_elementwise(4))
    assert [lp.kind for lp in _loops(func)] == ["parallel"]


def test_symbolic_inner_extent_gets_a_guarded_vector_split():
    from tensorir import size_var
    from tensorir.compute import compute, create_prim_func, placeholder
    m = size_var("m")
    x = placeholder((3, m), "float32", "x")
    y = compute((3, m), lambda i, j: x[i, j] + 1.0, "y")
    func = default_cpu_schedule(create_prim_func([x, y], name="inc"))
    assert [lp.kind for lp in _loops(func)] == ["parallel", "vectorized"]
    realize = tir.collect(func.body, lambda n: isinstance(n, tir.BlockRealize) and n.block.name == "y")[0]
    assert not tir.stmt.is_true(realize.predicate)
    module = build_kernels("c", func)
    for value in (1, 63, 64, 130):
        a = np.random.default_rng(value).standard_normal((3, value)).astype(np.float32)
        out = np.zeros_like(a)
        module["inc"](a, out)
        np.testing.assert_allclose(out, a + 1, rtol=1e-6)


def test_symbolic_inner_extent_under_many_constant_trips_keeps_its_chunk_loop_serial():
    # a transpose writing (heads, d, m): fusing the chunk loop into the parallel one made its guard
    # divide by (m + 63) // 64, which stays a masked 64-lane guard in C (64x the work at m = 1)
    from tensorir import size_var
    from tensorir.compute import compute, create_prim_func, placeholder
    m = size_var("m")
    x = placeholder((m, 4, 8), "float32", "x")
    y = compute((4, 8, m), lambda h, d, i: x[i, h, d] * 2.0, "y")
    func = default_cpu_schedule(create_prim_func([x, y], name="transpose2x"))
    loops = _loops(func)
    assert [lp.kind for lp in loops] == ["parallel", "serial", "vectorized"]
    assert loops[0].extent.value == 32 and loops[2].extent.value == 64
    module = build_kernels("c", func)
    for value in (1, 63, 64, 130):
        a = np.random.default_rng(value).standard_normal((value, 4, 8)).astype(np.float32)
        out = np.zeros((4, 8, value), np.float32)
        module["transpose2x"](a, out)
        np.testing.assert_array_equal(out, 2 * a.transpose(1, 2, 0))


def test_already_scheduled_and_blockless_functions_are_left_alone():
    func = _elementwise(64).with_attr(SCHEDULED_ATTR, True)
    assert default_cpu_schedule(func) is func
    lowered = tir.lower(_elementwise(64))
    assert default_cpu_schedule(lowered) is lowered
    with pytest.raises(TypeError, match="PrimFunc"):
        default_cpu_schedule("not a function")


def test_default_cpu_schedule_pass_schedules_only_unmarked_prim_funcs():
    import relaxscript as rx
    from relaxscript.irmodule import IRModule
    marked = _elementwise(32).with_attr(SCHEDULED_ATTR, True)
    mod = IRModule({"a": _elementwise(4096), "b": marked})
    out = rx.transform.DefaultCPUSchedule()(mod)
    assert out["b"] is marked and out["a"].attrs[SCHEDULED_ATTR] is True
    assert {lp.kind for lp in _loops(out["a"])} == {"parallel", "vectorized"}
    assert rx.transform.DefaultCPUSchedule()(out) is out
