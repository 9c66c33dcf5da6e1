"""The generated GEMM (all variants, threads, transposed B, epilogues) against NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.gemm import library as gemm_library
from backends.c.gemm.driver import variant_for
from backends.c.gemm.machine import SSE, MachineParams
from backends.c.gemm.params import derive_params, gemm_params

PARAMS = gemm_params()
# a second instance with other tiles (SSE: 6x8, a small L2 so mc and nc are small): the
# drivers' edges are exercised at other multiples
SMALL = derive_params(MachineParams(SSE, 8 << 10, 32 << 10, 256 << 10, 2))


def _reference(a, b, trans_b, bias, residual, act):
    out = a.astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    if bias is not None:
        out = out + bias
    if residual is not None:
        out = out + residual
    if act == "relu":
        out = np.maximum(out, 0)
    elif act == "silu":
        out = out / (1 + np.exp(-out))
    return out


def _run(m, n, k, trans_b, epilogue, act, threads, params, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if "bias" in epilogue else None
    residual = rng.standard_normal((m, n)).astype(np.float32) if "residual" in epilogue else None
    c = np.full((m, n), np.nan, np.float32)
    gemm_library.gemm(a, b, c, trans_b=trans_b, bias=bias, residual=residual, act=act, threads=threads,
                      params=params)
    np.testing.assert_allclose(c, _reference(a, b, trans_b, bias, residual, act),
                               rtol=2e-4, atol=2e-4 * max(1.0, np.sqrt(k)))


EPILOGUES = st.sampled_from([(), ("bias",), ("residual",), ("bias", "residual")])


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 90), k=st.integers(0, 600), trans_b=st.booleans(),
       epilogue=EPILOGUES, act=st.sampled_from(["none", "relu", "silu"]), threads=st.sampled_from([1, 2]),
       small=st.booleans(), seed=st.integers(0, 2**31))
def test_random_shapes_match_numpy(m, n, k, trans_b, epilogue, act, threads, small, seed):
    _run(m, n, k, trans_b, epilogue, act, threads, SMALL if small else PARAMS, seed)


def _boundaries(params, threads):
    s, large = params.skinny_rows, threads * params.packed_mc
    return {1: "gemv", 2: "skinny", s: "skinny", s + 1: "medium", large - 1: "medium", large: "large"}


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("threads", [1, 2])
def test_each_variant_at_the_boundaries_of_its_condition(which, threads):
    params = PARAMS if which == "machine" else SMALL
    for m, expected in _boundaries(params, threads).items():
        assert variant_for(m, params, threads) == expected
        assert gemm_library.variant(m, threads, params) == expected   # the C code agrees
        # n, k not multiples of any tile: ragged edges in every direction (and k over two kc blocks
        # of the tile that runs: the skinny one, or the packed one of medium and large)
        nr, kc = (params.nr, params.kc) if m <= params.skinny_rows else (params.packed_nr, params.packed_kc)
        _run(m, nr * 2 + 3, kc + 7, m % 2 == 0, ("bias",), "relu", threads, params, m)


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_are_split_over_threads_only_where_a_is_larger_than_b(threads):
    """At the large variant's row count the threads split the rows only while m > n (each thread packs
    all of the operand the split does not divide); n >= m keeps the medium variant's column split.
    Both sides of the condition, ragged widths, equal NumPy."""
    params = SMALL
    m = threads * params.packed_mc
    for n, expected in ((m - 1, "large"), (m, "medium"), (m + params.packed_nr + 3, "medium")):
        assert variant_for(m, params, threads, n=n) == expected
        assert gemm_library.variant(m, threads, params, n=n) == expected
        _run(m, n, params.packed_kc + 5, n % 2 == 1, ("bias",), "none", threads, params, n)


def test_epilogue_without_products():
    _run(3, 5, 0, False, ("bias", "residual"), "silu", 1, PARAMS, 0)


def test_wide_blocks_over_nc():
    _run(SMALL.skinny_rows + 2, SMALL.nc + SMALL.nr + 1, 40, False, (), "none", 2, SMALL, 1)
    _run(3, SMALL.skinny_nc * 2 + 1, 30, True, (), "none", 2, SMALL, 2)


def test_bad_operands_raise():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="do not give"):
        gemm_library.gemm(a, b, np.empty((2, 5), np.float32))
    with pytest.raises(ValueError, match="float32"):
        gemm_library.gemm(a, b, np.empty((2, 4), np.float64))
    with pytest.raises(ValueError, match="bias"):
        gemm_library.gemm(a, b, np.empty((2, 4), np.float32), bias=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="activation"):
        gemm_library.gemm(a, b, np.empty((2, 4), np.float32), act="softplus")


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("n", [21, 1024])   # rows of 1024 floats are 4 KiB apart (cache-set aliasing)
def test_run_time_choice_with_openblas_at_its_boundaries(trans_b, n):
    """Policy WITH_BLAS: more than skinny_limit rows go to OpenBLAS (when the target has it), one
    row to the GEMV, the rest to the skinny variant; results equal NumPy either way, epilogues included."""
    from backends import blas
    from backends.c.gemm.driver import ALIASED_ROWS, BLAS_SKINNY_ROWS, skinny_limit
    limit = skinny_limit(n, PARAMS)
    rows = min(ALIASED_ROWS, PARAMS.skinny_rows) if n == 1024 else PARAMS.skinny_rows
    assert limit == min(BLAS_SKINNY_ROWS, rows)
    has_blas = blas.backend() == "openblas"
    for m in (1, 2, limit, limit + 1):
        expected = "openblas" if has_blas and m > limit else variant_for(m, PARAMS, 2)
        assert variant_for(m, PARAMS, 2, blas=has_blas, n=n) == expected
        assert gemm_library.variant(m, 2, policy=gemm_library.WITH_BLAS, n=n) == expected
        rng = np.random.default_rng(m)
        a = rng.standard_normal((m, 37)).astype(np.float32)
        b = rng.standard_normal((n, 37) if trans_b else (37, n)).astype(np.float32)
        bias, residual = rng.standard_normal(n).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
        for k_empty in (False, True):
            aa, bb = (a[:, :0].copy(), (b[:, :0] if trans_b else b[:0]).copy()) if k_empty else (a, b)
            c = np.full((m, n), np.nan, np.float32)
            gemm_library.gemm(aa, bb, c, trans_b=trans_b, bias=bias, residual=residual, act="silu",
                              policy=gemm_library.WITH_BLAS)
            np.testing.assert_allclose(c, _reference(aa, bb, trans_b, bias, residual, "silu"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemv_one_row_split_over_threads_with_ragged_edges(which, trans_b):
    """m = 1 runs the GEMV: below the split size on one thread, above it B's rows (or, transposed,
    its output columns) split over the threads; k and n no tile, vector or GEMV_ROWS divides, k
    smaller than GEMV_ROWS per thread, and an output wider than one L1 chunk."""
    from backends.c.gemm.gemv import GEMV_ROWS
    params = PARAMS if which == "machine" else SMALL
    split_floats = params.gemv_split_bytes // 4
    n_wide = params.gemv_cols + params.lanes + 3
    shapes = [(7, 5), (GEMV_ROWS * 2 - 1, 37), (split_floats // 517 + 29, 517), (61, n_wide), (5, n_wide)]
    for seed, (k, n) in enumerate(shapes):
        assert variant_for(1, params, 2) == "gemv" and gemm_library.variant(1, 2, params) == "gemv"
        for threads in (1, 2):
            _run(1, n, k, trans_b, ("bias", "residual"), "silu", threads, params, seed)
            _run(1, n, k, trans_b, (), "none", threads, params, seed)


@pytest.mark.parametrize("which", ["machine", "small"])
def test_skinny_row_tiles_sweep_b_in_place(which):
    """One register tile and more: the skinny variant sweeps B in place
    with the row tiles (evened out: row_tiles) taking each panel in turn; every row count from one
    tile to the last skinny one (several tiles accumulate in a padded buffer), widths whose rows are a
    multiple of ALIAS_BYTES apart, widths over several column blocks (sweep_c_floats) and widths no
    panel divides, k over several SKINNY_KC blocks
    and not a multiple of one."""
    from backends.c.gemm.driver import ALIAS_BYTES, SKINNY_KC
    params = PARAMS if which == "machine" else SMALL
    aliased = ALIAS_BYTES // 4
    for n in (2 * aliased, aliased + params.nr, 3 * params.nr + 5, params.sweep_c_floats // params.mr + 3):
        for m in range(params.mr, params.skinny_rows + 1):
            assert variant_for(m, params, 2) == "skinny"
            for threads in (1, 2):
                _run(m, n, 2 * SKINNY_KC + 3, False, ("bias", "residual"), "relu", threads, params, m)


def test_row_tiles_are_even_and_cover_the_rows():
    from backends.c.gemm.driver import row_tiles
    assert row_tiles(8, 6) == [4, 4] and row_tiles(7, 6) == [4, 3] and row_tiles(16, 6) == [6, 5, 5]
    for mr in (1, 4, 6, 14):
        for rows in range(1, 60):
            tiles = row_tiles(rows, mr)
            assert sum(tiles) == rows and max(tiles) <= mr and max(tiles) - min(tiles) <= 1
            assert len(tiles) == -(-rows // mr)


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("threads", [1, 2])
def test_skinny_reads_b_in_place_up_to_one_register_tile_then_packs_it(which, threads):
    """The skinny variant reads B in place for up to mr rows (one register tile) and packs it from
    mr + 1 rows: both sides of that boundary, and the last skinny row count, with widths no panel
    divides and k over two kc blocks, equal NumPy."""
    params = PARAMS if which == "machine" else SMALL
    for m in (params.mr, params.mr + 1, params.skinny_rows):
        assert variant_for(m, params, threads) == "skinny"
        _run(m, params.nr * 3 + 5, params.kc + 9, False, ("bias", "residual"), "silu", threads, params, m)
        _run(m, params.skinny_nc + params.nr + 1, 2 * params.kc + 1, False, (), "none", threads, params, m + 1)


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("threads", [1, 2])
def test_rows_against_b_stored_n_by_k_as_dot_products(which, threads):
    """Up to NT_DOT_ROWS rows with B stored (n, k) run as dot products of nt_rows x nt_cols tiles: row
    counts at and around the tile and the limit, outputs no tile divides (and fewer than one tile),
    k no vector divides (and shorter than one vector), with and without an epilogue; one row more
    than the limit packs B as before."""
    from backends.c.gemm.gemv import NT_DOT_ROWS, nt_cols, nt_rows
    params = PARAMS if which == "machine" else SMALL
    cols, most = nt_cols(params), nt_rows(params)
    for i, m in enumerate((2, most - 1, most, most + 1, 2 * most + 1, NT_DOT_ROWS - 1, NT_DOT_ROWS, NT_DOT_ROWS + 1)):
        # the skinny variant runs them (SSE's small L1 sends more than its skinny_rows to the packed path)
        assert variant_for(m, params, threads) == ("skinny" if m <= params.skinny_rows else "medium")
        for j, (n, k) in enumerate(((cols - 1, params.lanes - 1), (5 * cols + 1, 3 * params.lanes + 5),
                                    (params.nr * 7 + 3, 577))):
            _run(m, n, k, True, ("bias", "residual"), "silu", threads, params, 10 * i + j)
            _run(m, n, k, True, (), "none", threads, params, 10 * i + j + 100)


def test_forced_avx2_build_runs_the_dot_products_of_b_stored_n_by_k():
    """The AVX2 build (16 registers: 6 x 2 accumulators) on this machine with AVX-512 off."""
    from backends.c.gemm.gemv import NT_DOT_ROWS
    from tests.backends.gemm.forced_avx2 import forced_avx2_library
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    rng = np.random.default_rng(11)
    for m in (1, 3, NT_DOT_ROWS, NT_DOT_ROWS + 1):
        n, k = int(rng.integers(1, 70)), int(rng.integers(1, 300))
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        c = np.full((m, n), np.nan, np.float32)
        assert lib.rs_gen_gemm(m, n, k, a.ctypes.data, b.ctypes.data, 1, c.ctypes.data, bias.ctypes.data, None,
                               0, 2, 0) == 0
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.T + bias, rtol=2e-4, atol=2e-4 * max(1.0, np.sqrt(k)))


def test_forced_avx2_build_runs_its_packed_tile():
    """The AVX2 build's medium and large variants (its packed tile: 6 x 16, kc from a quarter of L1)
    under GENERATED_ONLY, B stored either way, n and k past a panel and a kc block by a ragged edge;
    the policy beside OpenBLAS keeps these rows with OpenBLAS there (packed_beats_blas)."""
    from backends.c.gemm.driver import packed_beats_blas
    from tests.backends.gemm.forced_avx2 import forced_avx2_library
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    assert (p.packed_mr, p.packed_nr) == (6, 16) and not packed_beats_blas(p)
    rng = np.random.default_rng(12)
    for m in (p.skinny_rows + 1, p.skinny_rows + p.packed_mr + 1, 2 * p.packed_mc + 1):
        for trans_b in (0, 1):
            n, k = 2 * p.packed_nr + 5, p.packed_kc + 9
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
            residual = rng.standard_normal((m, n)).astype(np.float32)
            c = np.full((m, n), np.nan, np.float32)
            assert lib.rs_gen_gemm(m, n, k, a.ctypes.data, b.ctypes.data, trans_b, c.ctypes.data, None,
                                   residual.ctypes.data, 0, 2, 0) == 0
            want = a.astype(np.float64) @ (b.T if trans_b else b) + residual
            np.testing.assert_allclose(c, want, rtol=2e-4, atol=2e-4 * max(1.0, np.sqrt(k)))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), trans_b=st.booleans(), threads=st.sampled_from([1, 2]), with_epilogue=st.booleans(),
       seed=st.integers(0, 2**31))
def test_forced_avx2_build_over_random_skinny_shapes(data, trans_b, threads, with_epilogue, seed):
    """The AVX2 build (what Zen 3 runs; AVX-512 off where the host has it) over every skinny row count
    and the first packed ones: the in-place sweep's one and several row tiles (evened out, A's slice
    packed), the dot-product tiles of B stored (n, k), n = 1, widths a multiple of ALIAS_BYTES apart
    (the padded accumulator) and widths and depths no panel, vector or SKINNY_KC divides."""
    from backends.c.gemm.driver import ALIAS_BYTES
    from tests.backends.gemm.forced_avx2 import forced_avx2_library
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    m = data.draw(st.integers(1, p.skinny_rows + p.mr + 1), label="m")
    n = data.draw(st.one_of(st.integers(1, 5 * p.nr + 7), st.sampled_from([ALIAS_BYTES // 4, ALIAS_BYTES // 2])),
                  label="n")
    k = data.draw(st.integers(1, 3 * p.kc // 2), label="k")
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_epilogue else None
    residual = rng.standard_normal((m, n)).astype(np.float32) if with_epilogue else None
    c = np.full((m, n), np.nan, np.float32)
    assert lib.rs_gen_gemm(m, n, k, a.ctypes.data, b.ctypes.data, int(trans_b), c.ctypes.data,
                           None if bias is None else bias.ctypes.data,
                           None if residual is None else residual.ctypes.data, 0, threads, 0) == 0
    want = _reference(a, b, trans_b, bias, residual, "none")
    np.testing.assert_allclose(c, want, rtol=2e-4, atol=2e-4 * max(1.0, np.sqrt(k)))
