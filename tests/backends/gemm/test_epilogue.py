"""The generated GEMM's fused epilogues (every activation of driver.ACTIVATION_C, a bias, a residual
added before or after the activation) at every run-time variant: GEMV, skinny, medium, large, the
OpenBLAS path, the prepacked panels (A in place, A packed, rows split over threads), on this machine's
build, a small SSE tile set and the AVX2 build forced on an AVX-512 machine. References are written
here in float64, independently of the library's NumPy forms."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import blas
from backends.c.gemm import library as gemm_library
from backends.c.gemm.driver import ACTIVATIONS, RESIDUAL_AFTER_ACT, prepacked_rows, variant_for
from backends.c.gemm.machine import SSE, MachineParams
from backends.c.gemm.params import derive_params, gemm_params
from backends.c.gemm.prepacked import pack_weight

from .forced_avx2 import forced_avx2_library

PARAMS = gemm_params()
SMALL = derive_params(MachineParams(SSE, 8 << 10, 32 << 10, 256 << 10, 2))
_erf = np.vectorize(math.erf)
REFERENCE = {
    "none": lambda v: v,
    "relu": lambda v: np.where(v > 0, v, 0.0),
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "gelu": lambda v: v * 0.5 * (1.0 + _erf(v / math.sqrt(2.0))),
    "gelu_tanh": lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v))),
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
}
ORDERS = (None, "before", "after")


def test_every_activation_has_a_reference():
    assert set(REFERENCE) == set(ACTIVATIONS) == set(gemm_library.ACTIVATION_NUMPY)


def _operands(m, n, k, seed, bias, residual, scale=1.0):
    rng = np.random.default_rng(seed)
    a = (scale * rng.standard_normal((m, k))).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    r = rng.standard_normal((m, n)).astype(np.float32) if residual else None
    return a, w, b, r


def _expected(a, w, b, r, act, order):
    with np.errstate(over="ignore"):
        v = a.astype(np.float64) @ w.astype(np.float64) + (0.0 if b is None else b)
        if order == "before":
            v = v + r
        v = REFERENCE[act](v)
        return v + r if order == "after" else v


def _check(c, want, k):
    np.testing.assert_allclose(c, want, rtol=3e-4, atol=3e-4 * max(1.0, math.sqrt(k)))


def _run(m, n, k, act, order, bias, threads, params, seed, prepacked=False, policy=gemm_library.GENERATED_ONLY,
         scale=1.0):
    a, w, b, r = _operands(m, n, k, seed, bias, order is not None, scale)
    c = np.full((m, n), np.nan, np.float32)
    gemm_library.gemm(a, pack_weight(w, params.nr) if prepacked else w, c, bias=b, residual=r, act=act,
                      threads=threads, params=params, policy=policy, prepacked=prepacked,
                      unpacked=w if prepacked and policy == gemm_library.WITH_BLAS else None,
                      residual_after_act=order == "after")
    _check(c, _expected(a, w, b, r, act, order), k)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 90), k=st.integers(0, 500), act=st.sampled_from(sorted(ACTIVATIONS)),
       order=st.sampled_from(ORDERS), bias=st.booleans(), threads=st.sampled_from([1, 2]), small=st.booleans(),
       prepacked=st.booleans(), seed=st.integers(0, 2**31))
def test_random_shapes_match_numpy(m, n, k, act, order, bias, threads, small, prepacked, seed):
    _run(m, n, k, act, order, bias, threads, SMALL if small else PARAMS, seed, prepacked)


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("order", ORDERS)
def test_every_variant_of_the_plain_entry(act, order):
    """Rows at each variant's edges (GEMV, skinny, medium, large) on both tile sets, and, under the
    WITH_BLAS policy, the OpenBLAS path whose epilogue is one pass on the team."""
    for params, threads in ((PARAMS, 2), (SMALL, 1)):
        s, large = params.skinny_rows, threads * params.packed_mc
        for m in (1, 2, s, s + 1, large):
            assert variant_for(m, params, threads) in ("gemv", "skinny", "medium", "large")
            nr, kc = (params.nr, params.kc) if m <= s else (params.packed_nr, params.packed_kc)
            _run(m, 2 * nr + 3, kc + 7, act, order, m % 2 == 0, threads, params, m)
    if blas.backend() == "openblas":
        for m in (9, PARAMS.skinny_rows):   # past the skinny limit; more rows may keep the packed tile
            assert variant_for(m, PARAMS, 2, blas=True, n=70) == "openblas"
            _run(m, 70, 33, act, order, True, 2, PARAMS, m, policy=gemm_library.WITH_BLAS)


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("order", ORDERS)
def test_every_path_of_the_prepacked_entry(act, order):
    """One row (the panel row kernel without the unpacked weight, the GEMV with it), A in place, A
    packed in one and several row tiles, the rows split over threads, and OpenBLAS above
    prepacked_rows (WITH_BLAS)."""
    for params, threads in ((PARAMS, 2), (SMALL, 2)):
        p = params
        for m in (1, p.a_in_place_rows, p.a_in_place_rows + 1, p.mr + 1, p.skinny_rows + 1, threads * p.mc + 1):
            _run(m, 3 * p.nr + 5, p.kc + 9, act, order, m % 2 == 1, threads, params, m, prepacked=True)
    for m in (1, prepacked_rows(PARAMS), prepacked_rows(PARAMS) + 1):
        _run(m, 37, 130, act, order, True, 2, PARAMS, m, prepacked=True, policy=gemm_library.WITH_BLAS)


@pytest.mark.parametrize("act", ["silu", "sigmoid", "gelu", "gelu_tanh", "tanh"])
def test_large_magnitudes(act):
    """Products far beyond exp's range (|v| up to ~1e3): the clamped exp and the saturating tanh/erf stay
    finite and equal the reference (silu(-1000) = -0, sigmoid -> 0 / 1)."""
    _run(5, 40, 64, act, "after", True, 1, PARAMS, 3, prepacked=True, scale=40.0)
    _run(1, 40, 64, act, None, False, 1, PARAMS, 4, scale=40.0)


def test_forced_avx2_build_every_activation():
    """The AVX2 build's epilogue loops (8-wide libmvec calls) at its variants' edges, both residual
    orders, plain and prepacked."""
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    assert p.isa == "avx2"
    ptr = lambda x: None if x is None else x.ctypes.data  # noqa: E731
    for i, act in enumerate(sorted(ACTIVATIONS)):
        for order in ORDERS:
            for m in (1, 2, p.a_in_place_rows + 1, p.mr + 1, p.skinny_rows + 1, prepacked_rows(p) + 1):
                n, k = 2 * p.nr + 5, p.kc + 3
                a, w, b, r = _operands(m, n, k, m + i, True, order is not None)
                code = ACTIVATIONS[act] | (RESIDUAL_AFTER_ACT if order == "after" else 0)
                want = _expected(a, w, b, r, act, order)
                packed = pack_weight(w, p.nr)
                for prepacked in (False, True):
                    c = np.full((m, n), np.nan, np.float32)
                    if prepacked:
                        status = lib.rs_gen_gemm_prepacked(m, n, k, ptr(a), ptr(packed), ptr(w), ptr(c), ptr(b),
                                                           ptr(r), code, 2, 1)
                    else:
                        status = lib.rs_gen_gemm(m, n, k, ptr(a), ptr(w), 0, ptr(c), ptr(b), ptr(r), code, 2, 1)
                    assert status == 0
                    _check(c, want, k)


def _glibc_has_libmvec() -> bool:
    import platform
    name, version = platform.libc_ver()
    parts = tuple(int(p) for p in version.split(".")[:2]) if version else (0, 0)
    return platform.machine() == "x86_64" and name == "glibc" and parts >= (2, 35)


@pytest.mark.skipif(not _glibc_has_libmvec(), reason="glibc's vector math (x86-64, glibc >= 2.35) only")
def test_exp_activations_call_vector_math():
    """silu's and sigmoid's exp (argument clamped by selects) call glibc's vector expf: gcc if-converts
    the selects only when float compares may not trap (-fno-trapping-math); a scalar expf per element
    cost silu 12% of the MLP's 512-row product."""
    from backends.c.compiler import compile_shared
    path, _ = compile_shared(gemm_library.emit_gemm_library(PARAMS))
    assert b"v_expf" in path.read_bytes()
