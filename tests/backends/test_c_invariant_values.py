"""Loop-invariant float values the C emitter binds before a loop
(backends/c/invariant_values.py): what is hoisted, what must stay in the loop
(conditional loads, loops that may not run, buffers the loop writes), and the
results of every kernel against the interpreter."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from backends.c.invariant_values import invariant_values
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect

FAR = 10**12  # an index far outside any buffer: reading it would crash the process

SIG = '''
@T.prim_func
def {name}(x: T.Buffer(("n", "m"), "float32"), s: T.Buffer(("n",), "float32"),
           idx: T.Buffer(("n",), "int64"), y: T.Buffer(("n", "m"), "float32")):
    n = T.int64()
    m = T.int64({m_facts})'''

KERNELS = {
    # the row constant of a normalize loop: hoisted
    "row_norm": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] / T.sqrt(s[i] + 1e-05)
''',
    # a symbolic extent known to be positive (m >= 1): hoisted as well
    "positive_extent": '''
    for i in T.parallel(n):
        for j in T.vectorized(m):
            y[i, j] = x[i, j] / T.sqrt(s[i] + 1e-05)
''',
    # the same value twice in the loop: one constant
    "twice": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] / T.sqrt(s[i] + 1e-05) + T.sqrt(s[i] + 1e-05)
''',
    # the load is only made where the guard holds: not hoisted
    "under_if": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            if x[i, j] > 0.0:
                y[i, j] = x[i, j] / T.sqrt(s[idx[i]])
''',
    "select_branch": '''
    for i in T.parallel(n):
        for j in T.vectorized(16):
            y[i, j] = T.Select(x[i, j] > 0.0, x[i, j] / T.sqrt(s[idx[i]]), x[i, j])
''',
    # m may be 0: the loop may not run, so neither may its loads
    "may_not_run": '''
    for i in T.parallel(n):
        for j in T.vectorized(m):
            y[i, j] = x[i, j] / T.sqrt(s[idx[i]])
''',
    # s is written in the loop: its value changes from one iteration to the next
    "written_in_loop": '''
    for i in T.parallel(n):
        for j in range(16):
            y[i, j] = x[i, j] / T.sqrt(s[i] + 1.0)
            s[i] = s[i] + x[i, j] * x[i, j]
''',
    # ... also when the write goes through another view of the same storage
    "written_through_a_view": '''
    s_flat = T.Buffer((n,), "float32", data=s.data)
    for i in T.parallel(n):
        for j in range(16):
            y[i, j] = x[i, j] / T.sqrt(s[i] + 1.0)
            s_flat[i] = s_flat[i] + x[i, j] * x[i, j]
''',
}
HOISTED = {"row_norm", "positive_extent", "twice"}
GUARDED = {"under_if", "select_branch", "may_not_run"}  # read s[idx[i]]; idx may be out of range


M_FACTS = {"positive_extent": "lower=1"}


def _func(name: str):
    return tir.from_source(SIG.format(name=name, m_facts=M_FACTS.get(name, "")) + KERNELS[name])


@functools.lru_cache(maxsize=None)
def _module():
    return build_kernels("c", {name: _func(name) for name in KERNELS})


def _function_text(source: str, name: str) -> str:
    start = source.index(f"int32_t rs_kernel_{name}(")
    return source[start:source.index("\n}\n", start)]


def _split_at_loop(text: str, var: str) -> tuple[str, str]:
    """(text of the function before the loop over ``var``, text of the loop's body)."""
    header = re.search(rf"^.*for \(int64_t {var} = .*$", text, re.M)
    before = text[:header.start()]
    depth, pos = 1, header.end()
    while depth:
        pos += 1
        depth += {"{": 1, "}": -1}.get(text[pos], 0)
    return before, text[header.end():pos]


def _hoisted_lines(text: str) -> list[str]:
    return re.findall(r"const float rs_f\d+ = .*;", text)


def _run_both(name: str, n: int, m: int, rng, idx=None, s=None):
    func, kernel = _func(name), _module()[name]
    x = rng.standard_normal((n, m)).astype("float32")
    s = np.abs(rng.standard_normal(n)).astype("float32") + 0.5 if s is None else s
    idx = np.arange(n, dtype="int64") if idx is None else idx
    y0 = np.full((n, m), -7.0, "float32")
    expected = [x.copy(), s.copy(), idx.copy(), y0.copy()]
    tir.interpret(func, *expected)
    got = [x.copy(), s.copy(), idx.copy(), y0.copy()]
    kernel(*got)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)
    return got


# ---------------------------------------------------------------- hoisted
@pytest.mark.parametrize("name", sorted(HOISTED))
def test_row_constant_is_computed_once_before_the_inner_loop(name):
    text = _function_text(_module().source, name)
    before, body = _split_at_loop(text, "j")
    line, reciprocal = _hoisted_lines(before)
    assert "sqrtf" in line and "s[i]" in line
    root = re.search(r"rs_f\d+", line).group(0)
    # the division by it became a product with its reciprocal, bound once as well
    assert re.fullmatch(rf"const float rs_f\d+ = \(\(\(float\)1.0f\) / {root}\);", reciprocal)
    inverse = re.search(r"rs_f\d+", reciprocal).group(0)
    assert "sqrtf" not in body and "/" not in body and f"* {inverse})" in body
    # inside the row loop (it reads s[i]), not before it
    _, row_body = _split_at_loop(text, "i")
    assert line in row_body and reciprocal in row_body


def test_hoisted_constant_is_bound_once_and_used_twice():
    before, body = _split_at_loop(_function_text(_module().source, "twice"), "j")
    line, reciprocal = _hoisted_lines(before)
    name = re.search(r"rs_f\d+", line).group(0)
    inverse = re.search(r"rs_f\d+", reciprocal).group(0)
    assert body.count(name) == 1 and body.count(inverse) == 1 and name in reciprocal


def test_division_by_a_loop_invariant_load_multiplies_by_its_reciprocal():
    func = tir.from_source('''
@T.prim_func
def scale_rows(x: T.Buffer((4, 16), "float32"), s: T.Buffer((4,), "float32"), y: T.Buffer((4, 16), "float32")):
    for i in T.parallel(4):
        for j in T.vectorized(16):
            y[i, j] = x[i, j] / s[i] + x[i, j] / 3.0
''')
    module = build_kernels("c", {"scale_rows": func})
    before, body = _split_at_loop(_function_text(module.source, "scale_rows"), "j")
    assert "/" not in body and len(_hoisted_lines(before)) == 2   # 1 / s[i] and 1 / 3
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 16)).astype("float32")
    s = np.array([3.0, -0.5, 1e-3, 7.0], "float32")
    y = np.zeros((4, 16), "float32")
    module["scale_rows"](x, s, y)
    np.testing.assert_allclose(y, x / s[:, None] + x / np.float32(3.0), rtol=2e-7 * 4, atol=0)


@pytest.mark.parametrize("name", sorted(HOISTED))
def test_hoisted_kernels_match_the_interpreter_and_numpy(name):
    rng = np.random.default_rng(1)
    for n, m in ((1, 17), (4, 17), (3, 16)) if name != "positive_extent" else ((1, 1), (3, 5), (2, 16)):
        x, s, _, y = _run_both(name, n, m, rng)
        cols = min(m, 16) if name != "positive_extent" else m
        want = x[:, :cols] / np.sqrt(s[:, None] + np.float32(1e-5))
        if name == "twice":
            want = want + np.sqrt(s[:, None] + np.float32(1e-5))
        np.testing.assert_allclose(y[:, :cols], want, rtol=1e-5)
        assert np.all(y[:, cols:] == -7.0)


# ---------------------------------------------------------------- not hoisted
@pytest.mark.parametrize("name", sorted(GUARDED | {"written_in_loop", "written_through_a_view"}))
def test_conditional_or_changing_values_stay_in_the_loop(name):
    text = _function_text(_module().source, name)
    assert _hoisted_lines(text) == []
    _, body = _split_at_loop(text, "j")
    assert "sqrtf" in body


@pytest.mark.parametrize("name", ["under_if", "select_branch"])
def test_guarded_load_is_not_made_where_the_guard_fails(name):
    rng = np.random.default_rng(3)
    n = 4
    # rows 1 and 3 are all negative: their idx points far outside s, never read
    x_sign = np.array([1, -1, 1, -1], "float32")[:, None]
    idx = np.where(x_sign[:, 0] > 0, np.arange(n), FAR).astype("int64")
    func, kernel = _func(name), _module()[name]
    x = (np.abs(rng.standard_normal((n, 16))) + 0.1).astype("float32") * x_sign
    s = np.array([4.0, 1.0, 16.0, 1.0], "float32")
    expected = [x, s, idx, np.zeros((n, 16), "float32")]
    tir.interpret(func, *expected)
    y = np.zeros((n, 16), "float32")
    kernel(x, s, idx, y)
    np.testing.assert_allclose(y, expected[3], rtol=1e-6)
    positive = x_sign[:, 0] > 0
    np.testing.assert_allclose(y[positive], x[positive] / np.sqrt(s[positive])[:, None], rtol=1e-6)
    if name == "select_branch":
        np.testing.assert_array_equal(y[~positive], x[~positive])
    else:
        np.testing.assert_array_equal(y[~positive], 0.0)


def test_loop_that_may_not_run_reads_nothing_when_it_does_not():
    kernel = _module()["may_not_run"]
    n = 3
    x = np.zeros((n, 0), "float32")
    y = np.zeros((n, 0), "float32")
    kernel(x, np.ones(n, "float32"), np.full(n, FAR, "int64"), y)  # m = 0: must not crash
    rng = np.random.default_rng(4)
    for m in (1, 5, 16):
        _run_both("may_not_run", n, m, rng)


@pytest.mark.parametrize("name", ["written_in_loop", "written_through_a_view"])
def test_value_of_a_buffer_written_in_the_loop_is_recomputed(name):
    rng = np.random.default_rng(5)
    x, s0 = rng.standard_normal((3, 16)).astype("float32"), np.array([0.0, 1.0, 4.0], "float32")
    y, s = np.zeros((3, 16), "float32"), s0.copy()
    _module()[name](x, s, np.zeros(3, "int64"), y)
    prefix = np.concatenate([np.zeros((3, 1)), np.cumsum(x.astype("float64") ** 2, axis=1)[:, :-1]], axis=1)
    np.testing.assert_allclose(y, x / np.sqrt(s0[:, None] + prefix + 1.0), rtol=1e-5)
    np.testing.assert_allclose(s, s0 + (x.astype("float64") ** 2).sum(axis=1), rtol=1e-5)


# ---------------------------------------------------------------- invariant_values itself
def _inner(name: str) -> S.For:
    (loop,) = [lp for lp in collect(_func(name).body, lambda n: isinstance(n, S.For)) if lp.loop_var.name == "j"]
    return loop


def test_invariant_values_finds_the_maximal_costly_subexpression():
    value, reciprocal = invariant_values(_inner("row_norm"), lambda loop: True)
    assert isinstance(value, E.Call) and value.op == "sqrt"
    assert not collect(value, lambda n: isinstance(n, E.Var) and n.name == "j")
    assert isinstance(reciprocal, E.Div) and reciprocal.b is value


def test_invariant_values_needs_a_loop_that_runs():
    assert invariant_values(_inner("row_norm"), lambda loop: False) == []
    assert invariant_values(_inner("may_not_run"), lambda loop: True)  # told it runs: hoisted


def test_invariant_values_skips_cheap_loop_dependent_and_non_float_values():
    func = tir.from_source('''
@T.prim_func
def cheap(x: T.Buffer((8,), "float32"), c: T.Buffer((2,), "float32"), k: T.Buffer((2,), "int64"),
          y: T.Buffer((8,), "float32"), z: T.Buffer((8,), "int64")):
    for j in T.vectorized(8):
        y[j] = x[j] * (c[0] + c[1]) + T.sqrt(x[j])
        z[j] = k[0] // (k[1] + 1)
''')
    (loop,) = collect(func.body, lambda n: isinstance(n, S.For))
    assert invariant_values(loop, lambda lp: True) == []


# ---------------------------------------------------------------- known gaps (see the report)
# regression, was: bug: a guard `j < m` becomes the loop bound min(16, m) (guards.py), but hoist_values still sees extent 16 and hoists the guarded load before a loop that may run zero times (m = 0 reads s[-FAR])
def test_load_guarded_by_a_loop_bound_guard_is_not_hoisted():
    func = tir.from_source('''
@T.prim_func
def bound_guard(x: T.Buffer((16,), "float32"), s: T.Buffer(("m",), "float32"), y: T.Buffer((16,), "float32")):
    m = T.int64()
    for j in T.vectorized(16):
        if j < m:
            y[j] = x[j] / T.sqrt(s[m * 1000000000000 - 1000000000000])
''')
    text = _function_text(build_kernels("c", func).source, "bound_guard")
    assert _hoisted_lines(text) == []


# regression, was: bug: the right operand of && / || is evaluated only when the left one allows it (C, and the interpreter), but invariant_values treats it as always evaluated and hoists its loads
def test_load_in_the_right_operand_of_and_is_not_hoisted():
    func = tir.from_source('''
@T.prim_func
def and_guard(x: T.Buffer((16,), "float32"), s: T.Buffer(("m",), "float32"), y: T.Buffer((16,), "float32")):
    m = T.int64()
    for j in T.vectorized(16):
        y[j] = T.Select(m > 0 and x[j] < T.sqrt(s[m * 1000000000000 - 1000000000000]), 1.0, 0.0)
''')
    text = _function_text(build_kernels("c", func).source, "and_guard")
    assert _hoisted_lines(text) == []
