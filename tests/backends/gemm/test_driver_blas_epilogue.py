"""The generated GEMM's OpenBLAS path (more rows than the generated variants keep): OpenBLAS writes
c itself without a bias (beta = 0, no zero fill first), starts from the bias with one, and the
bias fill and the epilogue pass go over c on the team. Every combination, with c starting as NaN
(nothing may read it before writing), against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from backends import blas
from backends.c.gemm import library as gemm_library
from backends.c.gemm.driver import variant_for
from tests.backends.gemm.test_driver import PARAMS, _reference


@pytest.mark.parametrize("m, n, k", [(40, 1000, 96), (9, 21, 37), (70, 512, 0)])
@pytest.mark.parametrize("epilogue", [(), ("bias",), ("residual",), ("bias", "residual")])
@pytest.mark.parametrize("act", ["none", "silu"])
@pytest.mark.parametrize("threads", [1, 2])
def test_openblas_path_with_and_without_epilogues(m, n, k, epilogue, act, threads):
    has_blas = blas.backend() == "openblas"
    if not has_blas:
        pytest.skip("OpenBLAS (scipy-openblas32) not installed: the generated variants serve every m")
    assert variant_for(m, PARAMS, threads, blas=True, n=n) == "openblas"
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if "bias" in epilogue else None
    residual = rng.standard_normal((m, n)).astype(np.float32) if "residual" in epilogue else None
    c = np.full((m, n), np.nan, np.float32)
    gemm_library.gemm(a, b, c, bias=bias, residual=residual, act=act, threads=threads,
                      policy=gemm_library.WITH_BLAS)
    np.testing.assert_allclose(c, _reference(a, b, False, bias, residual, act), rtol=1e-4, atol=1e-4)
