"""backends.blas_parallel: how the shim splits one OpenBLAS product over the team (rows of a or
columns of b, whichever repeats the smaller operand's packing) and that every split computes the
same product, with column blocks that no cache-line width divides."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from backends import blas
from backends.blas_parallel import sgemm_split, shim


@pytest.mark.parametrize("m, n, k, threads, expected", [
    (32, 1536, 512, 2, ("columns", 2)),    # few rows: packing b dominates
    (127, 512, 512, 2, ("columns", 2)),    # just below the row limit
    (128, 512, 512, 2, ("columns", 2)),    # 2 m <= n: repeating a's packing is cheaper than b's
    (256, 512, 1408, 2, ("columns", 2)),   # the boundary 2 m == n
    (257, 512, 1408, 2, ("rows", 2)),      # just past it
    (512, 512, 512, 2, ("rows", 2)),       # square: rows (level with columns, as before)
    (1024, 1536, 512, 2, ("rows", 2)),
    (512, 4096, 1024, 3, ("columns", 3)),
    (200, 100, 1024, 4, ("rows", 4)),      # too narrow for two column blocks of 64
    (20, 100, 4096, 2, ("rows", 1)),       # narrow and few rows: one block of at least 16 rows
    (64, 64, 64, 2, ("none", 1)),          # below 2 MFLOP: one call
    (512, 512, 512, 1, ("none", 1)),       # one thread
])
def test_split_repeats_the_smaller_operands_packing(m, n, k, threads, expected):
    if shim() is None:
        pytest.skip("no C compiler for the BLAS shim")
    assert sgemm_split(m, n, k, threads) == expected


@pytest.mark.parametrize("m, n, k", [
    (40, 200, 300),     # columns, ragged blocks: 200 / 2 rounds down to 96 columns
    (130, 1000, 96),    # columns past the old row limit, a ragged width
    (300, 333, 257),    # rows
    (100, 130, 520),    # columns at the narrowest split: blocks of 64 and 66 columns (65 rounds down)
])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("team", [2, 3])
def test_every_split_computes_the_product(m, n, k, trans_b, team):
    if blas._dispatcher() is None:
        pytest.skip("OpenBLAS (scipy-openblas32) or a C compiler missing")
    cell = ctypes.c_int.in_dll(shim(), "rs_team_threads")
    before = cell.value
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    expected = 0.5 * (a @ (b.T if trans_b else b)) + 2.0 * c
    try:
        cell.value = team   # blas.num_threads() is 0: the split follows the team size
        blas.sgemm(a, b, c, trans_b=trans_b, alpha=0.5, beta=2.0)
    finally:
        cell.value = before
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
