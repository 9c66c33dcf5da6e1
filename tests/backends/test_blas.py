"""backends.blas.sgemm (OpenBLAS, a core dependency; NumPy when it cannot be loaded) and the
openblas.* library entries."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import blas, get_library
from tensorir.errors import ShapeMismatchError


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9), trans_a=st.booleans(),
       trans_b=st.booleans(), alpha=st.sampled_from([1.0, 0.5]), beta=st.sampled_from([0.0, 2.0]))
def test_sgemm_matches_numpy(m, k, n, trans_a, trans_b, alpha, beta):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    want = alpha * (a.T if trans_a else a) @ (b.T if trans_b else b) + beta * c
    blas.sgemm(a, b, c, trans_a, trans_b, alpha, beta)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_numpy_fallback_matches(monkeypatch):
    monkeypatch.setattr(blas, "_openblas_sgemm", lambda: None)
    assert blas.backend() == "numpy"
    a = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    b = np.ones((3, 4), np.float32)
    c = np.zeros((2, 2, 4), np.float32)
    blas.sgemm(a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_openblas_is_a_core_dependency_and_is_used():
    # a plain `pip install relaxscript` must give the OpenBLAS path: the NumPy fallback inside the VM
    # ran the models 3-16x slower than NumPy itself
    tomllib = pytest.importorskip("tomllib")   # the standard library's from Python 3.11 on
    with open(pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)["project"]
    assert any(dep.startswith("scipy-openblas32") for dep in project["dependencies"])
    assert blas.backend() == "openblas"


def test_bad_operands_raise_clear_errors():
    a, b = np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)
    with pytest.raises(ShapeMismatchError, match="do not give"):
        blas.sgemm(a, b, np.zeros((2, 5), np.float32))
    with pytest.raises(ShapeMismatchError, match="float32"):
        blas.sgemm(a.astype(np.float64), b, np.zeros((2, 5), np.float32))
    with pytest.raises(ShapeMismatchError, match="contiguous"):
        blas.sgemm(np.zeros((3, 2), np.float32).T, np.zeros((3, 5), np.float32), np.zeros((2, 5), np.float32))


def test_library_entries_batched_and_bias():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    out = np.zeros((2, 3, 5), np.float32)
    get_library("openblas.sgemm").run_dps([a, w], [out])
    np.testing.assert_allclose(out, a @ w, rtol=1e-5, atol=1e-5)
    entry = get_library("openblas.sgemm_bias")
    entry.run_dps([a, w, bias], [out])
    np.testing.assert_allclose(out, a @ w + bias, rtol=1e-5, atol=1e-5)
    entry.impl_for("c")(a, w, bias.reshape(1, 5), out)
    np.testing.assert_allclose(out, a @ w + bias, rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeMismatchError, match="bias"):
        entry.run_dps([a, w, np.zeros(4, np.float32)], [out])


@pytest.mark.parametrize("m", [1, 3, 40, 200])
@pytest.mark.parametrize("trans_b", [False, True])
def test_large_products_split_over_threads_match_numpy(m, trans_b, monkeypatch):
    # force the block splits over OpenMP threads (rows for tall a, columns of b for skinny a)
    monkeypatch.setattr(blas, "num_threads", lambda: 3)
    rng = np.random.default_rng(m)
    k, n = 1024, 600
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    blas.sgemm(a, b, c, trans_b=trans_b)
    np.testing.assert_allclose(c, a @ (b.T if trans_b else b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("k", [515, 1031])
def test_single_row_split_by_weight_rows_handles_remainders_and_beta(threads, k, monkeypatch):
    # rs_sgemv_rows: k not a multiple of the 8-row sweep nor of the thread count; beta != 0 reads c
    monkeypatch.setattr(blas, "num_threads", lambda: threads)
    rng = np.random.default_rng(k)
    a = rng.standard_normal((1, k)).astype("float32")
    b = rng.standard_normal((k, 777)).astype("float32")
    c = rng.standard_normal((1, 777)).astype("float32")
    expected = 0.5 * (a.astype(np.float64) @ b) + 2.0 * c
    blas.sgemm(a, b, c, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@settings(max_examples=30, deadline=None)
@given(batch=st.sampled_from([(1,), (3,), (2, 3)]), m=st.integers(0, 70), n=st.integers(1, 40),
       k=st.integers(0, 20), threads=st.sampled_from([1, 2, 3]))
def test_batched_sgemm_matches_numpy(batch, m, n, k, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float32)
    c = np.full((*batch, m, n), np.nan, np.float32)
    original = blas.num_threads
    blas.num_threads = lambda: threads   # with fewer batches than threads each product is split instead
    try:
        blas.sgemm_batched(a, b, c)
        get_library("openblas.sgemm_batched").run_dps([a, b], [out := np.empty_like(c)])
    finally:
        blas.num_threads = original
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_batched_sgemm_rejects_shapes_that_do_not_fit():
    f = np.zeros
    with pytest.raises(ShapeMismatchError, match="equal batch dims"):
        blas.sgemm_batched(f((2, 3, 4), np.float32), f((3, 4, 5), np.float32), f((2, 3, 5), np.float32))
    with pytest.raises(ShapeMismatchError, match="do not give"):
        blas.batched_params((2, 3, 4), (2, 4, 5), (2, 3, 6))
    with pytest.raises(ShapeMismatchError, match="at least 3-D"):
        blas.batched_params((3, 4), (4, 5), (3, 5))
    with pytest.raises(ShapeMismatchError, match="float32"):
        blas.sgemm_batched(f((2, 3, 4)), f((2, 4, 5)), f((2, 3, 5)))
