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


# m = None: the machine's skinny_rows, the most rows OpenBLAS keeps on every machine (beyond, the
# medium and large variants stay generated where their packed tile beats OpenBLAS)
@pytest.mark.parametrize("m, n, k", [(None, 1000, 96), (9, 21, 37), (None, 512, 0)])
@pytest.mark.parametrize("epilogue", [(), ("bias",), ("residual",), ("bias", "residual")])
@pytest.mark.parametrize("act", ["none", "silu"])
@pytest.mark.parametrize("threads", [1, 2])
def test_openblas_path_with_and_without_epilogues(m, n, k, epilogue, act, threads):
    has_blas = blas.backend() == "openblas"
    if not has_blas:
        pytest.skip("OpenBLAS (scipy-openblas32) not installed: the generated variants serve every m")
    m = PARAMS.skinny_rows if m is None else m
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


@pytest.mark.parametrize("trans_b", [False, True])
def test_rows_past_the_skinny_ones_beside_openblas(trans_b):
    """Policy WITH_BLAS past skinny_rows: the packed tile where it beats OpenBLAS (B stored (k, n)),
    OpenBLAS otherwise; the C code and its Python mirror agree, and both give NumPy's answer."""
    from backends.c.gemm.driver import packed_beats_blas
    if blas.backend() != "openblas":
        pytest.skip("OpenBLAS (scipy-openblas32) not installed: the generated variants serve every m")
    m, n, k = PARAMS.skinny_rows + 1, 3 * PARAMS.packed_nr + 5, PARAMS.packed_kc + 3
    stays = packed_beats_blas(PARAMS) and not trans_b
    expected = "medium" if stays else "openblas"
    if not trans_b:
        assert variant_for(m, PARAMS, 2, blas=True, n=n) == expected
        assert gemm_library.variant(m, 2, PARAMS, gemm_library.WITH_BLAS, n=n) == expected
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    residual = rng.standard_normal((m, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    gemm_library.gemm(a, b, c, trans_b=trans_b, residual=residual, act="silu", threads=2, policy=gemm_library.WITH_BLAS)
    np.testing.assert_allclose(c, _reference(a, b, trans_b, None, residual, "silu"), rtol=1e-4, atol=1e-4)
