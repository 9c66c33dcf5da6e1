"""fuse_loops / remove_unit_loops (tensorir/transform/fuse_loops.py): which adjacent
loops fuse, which must not, and that fusing keeps the interpreter's and C's results."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from backends.c.accumulate import match_accumulation
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect
from tensorir.schedule_rules import default_cpu_schedule
from tensorir.structural import structural_equal
from tensorir.transform import PASSES, lower
from tensorir.transform.fuse_loops import fuse_loops, remove_unit_loops
from tests.tensorir.test_schedule_rules_kernels import softmax_func, softmax_numpy

HYPOTHESIS = settings(max_examples=12, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _loops(func_or_stmt, kind=None) -> list:
    node = func_or_stmt.body if isinstance(func_or_stmt, tir.PrimFunc) else func_or_stmt
    return collect(node, lambda n: isinstance(n, S.For) and (kind is None or n.kind == kind))


def _row_body(func) -> list:
    """The statements of the (single) parallel row loop's body."""
    (row,) = _loops(func, "parallel")
    return list(row.body.seq) if isinstance(row.body, S.SeqStmt) else [row.body]


def _unfused_lower(func):
    """``lower`` without its final fuse_loops pass."""
    assert PASSES[-1] is fuse_loops
    for lowering_pass in PASSES[:-1]:
        func = lowering_pass(func)
    return func


def _assert_unchanged(func):
    fused = fuse_loops(func)
    assert len(_loops(fused)) == len(_loops(func))
    assert structural_equal(fused.body, func.body)


# ---------------------------------------------------------------- what fuses
STAGE_THEN_SUM = '''
@T.prim_func
def stage_then_sum(x: T.Buffer(("n", 16), "float32"), y: T.Buffer(("n", 16), "float32"),
                   s: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = T.exp(x[i, j])
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k]
'''


def test_stage_then_accumulation_fuse_with_the_init_moved_in_front():
    func = tir.from_source(STAGE_THEN_SUM)
    assert len(_loops(func)) == 3
    fused = fuse_loops(func)
    assert len(_loops(fused)) == 2
    init, loop = _row_body(fused)
    assert isinstance(init, S.BufferStore) and init.buffer.name == "s"
    assert isinstance(init.value, E.FloatImm) and init.value.value == 0.0
    assert isinstance(loop, S.For) and loop.kind == "vectorized" and loop.extent.value == 16
    stage, acc = loop.body.seq
    assert stage.buffer.name == "y" and acc.buffer.name == "s"
    # the sum now reads the element the stage just wrote, at the fused loop's variable
    (load,) = collect(acc.value, lambda n: isinstance(n, E.BufferLoad) and n.buffer.name == "y")
    assert load.indices[-1] is loop.loop_var and stage.indices[-1] is loop.loop_var
    # the C emitter still finds the (one) accumulation in the fused loop
    found = match_accumulation(loop)
    assert found is not None and found.store is acc and found.op is E.Add


def test_stage_then_accumulation_fuse_in_either_order():
    func = tir.from_source('''
@T.prim_func
def sum_then_stage(x: T.Buffer(("n", 16), "float32"), y: T.Buffer(("n", 16), "float32"),
                   s: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + x[i, k]
        for j in T.vectorized(16):
            y[i, j] = x[i, j] * 2.0
''')
    fused = fuse_loops(func)
    init, loop = _row_body(fused)
    assert isinstance(init, S.BufferStore) and loop.kind == "vectorized"
    assert [st.buffer.name for st in loop.body.seq] == ["s", "y"]


def test_two_vectorized_stages_fuse():
    func = tir.from_source('''
@T.prim_func
def two_stages(x: T.Buffer(("n", 8), "float32"), y: T.Buffer(("n", 8), "float32"),
               z: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        for j in T.vectorized(8):
            y[i, j] = T.exp(x[i, j])
        for j2 in T.vectorized(8):
            z[i, j2] = y[i, j2] * 2.0 + x[i, j2]
''')
    (loop,) = _row_body(fuse_loops(func))
    assert loop.kind == "vectorized" and [st.buffer.name for st in loop.body.seq] == ["y", "z"]


def test_lowered_softmax_computes_exp_and_sum_in_one_loop():
    scheduled = default_cpu_schedule(softmax_func(64))
    unfused, lowered = _unfused_lower(scheduled), lower(scheduled)
    assert len(_loops(unfused)) == len(_loops(lowered)) + 1
    (loop,) = [lp for lp in _loops(lowered) if lp.kind != "parallel"
               and collect(lp, lambda n: isinstance(n, E.Call) and n.op == "exp")]
    assert loop.kind == "vectorized" and isinstance(loop.body, S.SeqStmt) and len(loop.body.seq) == 2
    acc = match_accumulation(loop)
    assert acc is not None and acc.store.buffer.name == "total" and acc.op is E.Add
    # the sum's init went in front of the fused loop
    body = _row_body(lowered)
    pos = body.index(loop)
    assert isinstance(body[pos - 1], S.BufferStore) and body[pos - 1].buffer.name == "total"
    # and the C kernel keeps the exp inside the omp simd reduction loop
    source = build_kernels("c", scheduled).source
    reduction = source[source.index("reduction(+:"):]
    assert "rs_expf" in reduction[:reduction.index("}")]


# ---------------------------------------------------------------- what must not fuse
NOT_FUSIBLE = {
    "different_extents": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = T.exp(x[i, j])
        s[i] = 0.0
        for k in range(8):
            s[i] = s[i] + y[i, k]
''',
    "shifted_element": '''
    for i in T.parallel(n):
        for j in T.vectorized(15):
            y[i, j] = T.exp(x[i, j])
        for j2 in T.vectorized(15):
            z[i, j2] = y[i, j2 + 1]
''',
    "reversed_element": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = T.exp(x[i, j])
        for j2 in T.vectorized(16):
            z[i, j2] = y[i, 15 - j2]
''',
    "reads_the_accumulator": '''
    for i in T.parallel(n):
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + x[i, k]
        for j in T.vectorized(16):
            y[i, j] = x[i, j] / s[i]
''',
    "accumulator_read_before_it_is_written": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] / s[i]
        for k in range(16):
            s[i] = s[i] + x[i, k]
''',
    "two_accumulations": '''
    for i in T.parallel(n):
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + x[i, k]
        t[i] = 0.0
        for k2 in range(16):
            t[i] = t[i] + x[i, k2] * x[i, k2]
''',
    "serial_stage": '''
    for i in T.parallel(n):
        for j in range(16):
            y[i, j] = T.exp(x[i, j])
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k]
''',
    "non_injective_index": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j // 2] = x[i, j]
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k // 2]
''',
    "between_writes_what_the_first_reads": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] * t[i]
        t[i] = 2.0
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k]
''',
    "between_reads_what_the_first_writes": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] * 2.0
        t[i] = y[i, 3]
        for j2 in T.vectorized(16):
            z[i, j2] = y[i, j2] + 1.0
''',
    "parallel_loops": '''
    for j in T.parallel(16):
        y[0, j] = T.exp(x[0, j])
    for j2 in T.parallel(16):
        z[0, j2] = y[0, j2] * 2.0
''',
    "annotated_loop": '''
    for i in T.parallel(n):
        for j in T.vectorized(16, annotations={"keep": 1}):
            y[i, j] = T.exp(x[i, j])
        for j2 in T.vectorized(16):
            z[i, j2] = y[i, j2] * 2.0
''',
}
SIGNATURE = '''
@T.prim_func
def {name}(x: T.Buffer(("n", 16), "float32"), y: T.Buffer(("n", 16), "float32"),
           z: T.Buffer(("n", 16), "float32"), s: T.Buffer(("n",), "float32"),
           t: T.Buffer(("n",), "float32")):
    n = T.int64()'''


def _not_fusible(name: str):
    return tir.from_source(SIGNATURE.format(name=name) + NOT_FUSIBLE[name])


def _random_args(rng, n: int) -> list:
    x = rng.standard_normal((n, 16)).astype("float32")
    return [x] + [np.zeros((n, 16), "float32") for _ in range(2)] + \
        [rng.standard_normal(n).astype("float32") for _ in range(2)]


@pytest.mark.parametrize("name", sorted(NOT_FUSIBLE))
def test_illegal_fusions_are_left_alone(name):
    _assert_unchanged(_not_fusible(name))


@functools.lru_cache(maxsize=None)
def _not_fusible_module():
    return build_kernels("c", {name: _not_fusible(name) for name in NOT_FUSIBLE})


@pytest.mark.parametrize("name", sorted(NOT_FUSIBLE))
def test_illegal_fusion_cases_keep_their_results_in_c(name):
    func, kernel = _not_fusible(name), _not_fusible_module()[name]
    rng = np.random.default_rng(5)
    for n in (1, 3):
        args = _random_args(rng, n)
        expected = [a.copy() for a in args]
        tir.interpret(func, *expected)
        kernel(*args)
        for want, got in zip(expected, args):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_three_loops_fuse_only_where_legal():
    """y -> sum over y (fuses), then a stage dividing by the sum (must not join them)."""
    func = tir.from_source(SIGNATURE.format(name="three") + '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = T.exp(x[i, j])
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k]
        for j2 in T.vectorized(16):
            z[i, j2] = y[i, j2] / s[i]
''')
    fused = fuse_loops(func)
    init, first, last = _row_body(fused)
    assert isinstance(init, S.BufferStore)
    assert [st.buffer.name for st in first.body.seq] == ["y", "s"]
    assert isinstance(last.body, S.BufferStore) and last.body.buffer.name == "z"


# regression, was: bug: fusing a stage with an accumulation, then with a second accumulation, puts two accumulations in one loop (the module doc allows one)
def test_a_fused_loop_takes_no_second_accumulation():
    func = tir.from_source(SIGNATURE.format(name="stage_sum_sum") + '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] * 2.0
        s[i] = 0.0
        for k in range(16):
            s[i] = s[i] + y[i, k]
        t[i] = 0.0
        for k2 in range(16):
            t[i] = t[i] + y[i, k2] * y[i, k2]
''')
    fused = fuse_loops(func)
    for loop in _loops(fused, "vectorized"):
        stores = loop.body.seq if isinstance(loop.body, S.SeqStmt) else [loop.body]
        accumulating = [st for st in stores if isinstance(st, S.BufferStore) and st.buffer.name in ("s", "t")]
        assert len(accumulating) <= 1


def test_fuse_loops_rejects_non_functions():
    with pytest.raises(TypeError, match="PrimFunc"):
        fuse_loops(tir.from_source(STAGE_THEN_SUM).body)


# ---------------------------------------------------------------- same results
ROW_KERNEL = '''
@T.prim_func
def row_kernel(x: T.Buffer(("n", "m"), "float32"), y: T.Buffer(("n", "m"), "float32"),
               z: T.Buffer(("n", "m"), "float32"), s: T.Buffer(("n",), "float32"),
               t: T.Buffer(("n",), "float32")):
    n = T.int64()
    m = T.int64()
    for i in T.parallel(n):
        t[i] = T.float32("-inf")
        for k0 in range(m):
            t[i] = T.max(t[i], x[i, k0])
        for j in T.vectorized(m):
            y[i, j] = T.exp(x[i, j] - t[i])
        s[i] = 0.0
        for k in range(m):
            s[i] = s[i] + y[i, k]
        for j2 in T.vectorized(m):
            z[i, j2] = y[i, j2] / s[i]
'''


@functools.lru_cache(maxsize=None)
def _row_kernel():
    func = tir.from_source(ROW_KERNEL)
    return func, fuse_loops(func), build_kernels("c", func)["row_kernel"]


def test_row_kernel_fuses_only_the_exp_with_the_sum():
    func, fused, _ = _row_kernel()
    assert len(_loops(func)) == 5 and len(_loops(fused)) == 4
    fused_loops = [lp for lp in _loops(fused, "vectorized") if isinstance(lp.body, S.SeqStmt)]
    (loop,) = fused_loops
    assert [st.buffer.name for st in loop.body.seq] == ["y", "s"]


@HYPOTHESIS
@given(n=st.integers(1, 6), m=st.integers(1, 40), seed=st.integers(0, 2**16), scale=st.sampled_from([0.1, 1.0, 8.0]))
def test_fusing_keeps_interpreter_results_and_c_matches_numpy(n, m, seed, scale):
    func, fused, kernel = _row_kernel()
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, m)) * scale).astype("float32")

    def run(run_func):
        args = [x.copy()] + [np.full((n, m), np.nan, "float32") for _ in range(2)] + \
            [np.full(n, np.nan, "float32") for _ in range(2)]
        run_func(*args)
        return args

    before = run(lambda *a: tir.interpret(func, *a))
    after = run(lambda *a: tir.interpret(fused, *a))
    for want, got in zip(before, after):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    _, y, z, s, t = run(kernel)
    np.testing.assert_allclose(t, x.max(axis=1))
    np.testing.assert_allclose(y, np.exp(x - x.max(axis=1, keepdims=True)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(s, y.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(z, softmax_numpy(x), rtol=1e-5, atol=1e-7)


@functools.lru_cache(maxsize=None)
def _softmax(width: int):
    scheduled = default_cpu_schedule(softmax_func(width))
    return _unfused_lower(scheduled), lower(scheduled), build_kernels("c", scheduled)["softmax"]


@HYPOTHESIS
@given(width=st.sampled_from([16, 40]), n=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_lowered_scheduled_softmax_same_before_and_after_fusing(width, n, seed):
    unfused, fused, kernel = _softmax(width)
    assert len(_loops(fused)) < len(_loops(unfused))
    x = (np.random.default_rng(seed).standard_normal((n, width)) * 3).astype("float32")
    results = []
    for func in (unfused, fused):
        out = np.full_like(x, np.nan)
        tir.interpret(func, x, out)
        results.append(out)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-8)
    got = np.full_like(x, np.nan)
    kernel(x, got)
    np.testing.assert_allclose(got, softmax_numpy(x), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- remove_unit_loops
UNIT_LOOPS = '''
@T.prim_func
def unit_loops(x: T.Buffer(("n", 8), "float32"), y: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        for u in range(1):
            for j in T.vectorized(8):
                y[i + u, j] = x[i + u, j] * 2.0
        for v in T.vectorized(3, 4):
            y[i, v] = y[i, v] + 1.0
'''


def test_remove_unit_loops_substitutes_the_single_iteration():
    func = tir.from_source(UNIT_LOOPS)
    out = remove_unit_loops(func)
    assert sorted(lp.loop_var.name for lp in _loops(out)) == ["i", "j"]
    used = {v.name for v in collect(out.body, lambda n: isinstance(n, E.Var))}
    assert "u" not in used and "v" not in used
    (store_j, store_v) = collect(out.body, lambda n: isinstance(n, S.BufferStore))
    # v ran from 3: its single iteration stores y[i, 3]
    assert isinstance(store_v.indices[1], E.IntImm) and store_v.indices[1].value == 3
    x = np.arange(24, dtype="float32").reshape(3, 8)
    want, got = np.zeros_like(x), np.zeros_like(x)
    tir.interpret(func, x, want)
    tir.interpret(out, x, got)
    np.testing.assert_array_equal(got, want)
    expected = x * 2
    expected[:, 3] += 1
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("header", ["T.parallel(1)", 'T.serial(1, annotations={"pragma": 1})', "T.unroll(1)"])
def test_remove_unit_loops_keeps_parallel_and_annotated_loops(header):
    func = tir.from_source(f'''
@T.prim_func
def kept(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
    for u in {header}:
        for j in T.vectorized(4):
            y[j + u] = x[j + u] + 1.0
''')
    out = remove_unit_loops(func)
    assert sorted(lp.loop_var.name for lp in _loops(out)) == ["j", "u"]
    assert structural_equal(out.body, func.body)


def test_lower_removes_unit_loops_of_compute_at_stages():
    scheduled = default_cpu_schedule(softmax_func(16))
    assert any(isinstance(lp.extent, E.IntImm) and lp.extent.value == 1 for lp in _loops(scheduled))
    lowered = lower(scheduled)
    assert not any(isinstance(lp.extent, E.IntImm) and lp.extent.value == 1 for lp in _loops(lowered))


def test_remove_unit_loops_rejects_non_functions():
    with pytest.raises(TypeError, match="PrimFunc"):
        remove_unit_loops(tir.from_source(UNIT_LOOPS).body)
