"""The TE-style builder: generated prim_funcs interpret like NumPy and round-trip."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir import expr as E
from tensorir.compute import (compute, create_prim_func, placeholder, reduce_axis, reduce_max, reduce_min,
                              reduce_prod, reduce_sum)

REDUCERS = {"sum": (reduce_sum, np.sum), "max": (reduce_max, np.max), "min": (reduce_min, np.min),
            "prod": (reduce_prod, np.prod)}


def _normalize_rows_func():
    n = tir.size_var("n")
    x = placeholder((n, 4), "float32", "x")
    k = reduce_axis(4, "k")
    s = compute((n,), lambda i: reduce_sum(x[i, k], [k]), "s")
    y = compute((n, 4), lambda i, j: x[i, j] / s[i], "y")
    return create_prim_func([x, y], name="normalize")


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 9), reducer=st.sampled_from(sorted(REDUCERS)))
def test_reductions_match_numpy(n, reducer):
    build, ref = REDUCERS[reducer]
    m = tir.size_var("m")
    x = placeholder((m, 3), "float32", "x")
    k = reduce_axis(3, "k")
    out = compute((m,), lambda i: build(x[i, k], [k]), "out")
    func = create_prim_func([x, out])
    a = np.random.default_rng(n).uniform(0.5, 1.5, (n, 3)).astype("float32")
    result = np.zeros(n, "float32")
    tir.interpret(func, a, result)
    np.testing.assert_allclose(result, ref(a, axis=1), rtol=1e-5)


def test_intermediate_stage_becomes_root_alloc_buffer():
    func = _normalize_rows_func()
    assert [b.name for b in func.root_block.alloc_buffers] == ["s"]
    a = np.random.default_rng(0).uniform(1, 2, (5, 4)).astype("float32")
    y = np.zeros_like(a)
    tir.interpret(func, a, y)
    np.testing.assert_allclose(y, a / a.sum(axis=1, keepdims=True), rtol=1e-6)


def test_generated_function_round_trips():
    func = _normalize_rows_func()
    tir.assert_structural_equal(tir.from_source(func.script()), func)


def test_output_dtype_casts_the_value():
    x = placeholder((4,), "int32", "x")
    y = compute((4,), lambda i: x[i] * 2, "y", dtype="float32")
    func = create_prim_func([x, y])
    out = np.zeros(4, "float32")
    tir.interpret(func, np.arange(4, dtype="int32"), out)
    np.testing.assert_array_equal(out, [0, 2, 4, 6])


def test_variadic_index_lambda_and_arity_error():
    x = placeholder((2, 3), "float32", "x")
    y = compute((2, 3), lambda *idx: x[idx] + E.FloatImm(1.0), "y")
    func = create_prim_func([x, y])
    out = np.zeros((2, 3), "float32")
    tir.interpret(func, np.ones((2, 3), "float32"), out)
    assert (out == 2).all()
    with pytest.raises(ValueError, match="indices"):
        compute((2, 3), lambda i: x[i, 0], "bad")
