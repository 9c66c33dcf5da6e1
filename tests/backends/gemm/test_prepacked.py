"""The generated GEMM on a weight packed once (prepacked.py, the driver's B_PREPACKED path) against
NumPy: random shapes with ragged edges, one row (the multi-panel streams and their ragged rest), the
boundaries of its thread split and A handling, and the packed operand's checks."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.gemm import library as gemm_library
from backends.c.gemm.driver import PANEL_STREAMS
from backends.c.gemm.machine import SSE, MachineParams
from backends.c.gemm.params import derive_params, gemm_params
from backends.c.gemm.prepacked import pack_weight, prepacked_dims, unpack_weight
from tensorir.errors import ShapeMismatchError

from .forced_avx2 import forced_avx2_library

PARAMS = gemm_params()
SMALL = derive_params(MachineParams(SSE, 8 << 10, 32 << 10, 256 << 10, 2))   # 6x8 tiles, small mc


def _run(m, n, k, params, threads, seed, bias=True, residual=False, act="none"):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    r = rng.standard_normal((m, n)).astype(np.float32) if residual else None
    c = np.full((m, n), np.nan, np.float32)
    gemm_library.gemm(a, pack_weight(w, params.nr), c, bias=b, residual=r, act=act, threads=threads, params=params,
                      prepacked=True)
    expected = a.astype(np.float64) @ w.astype(np.float64)
    expected = expected + (0 if b is None else b) + (0 if r is None else r)
    if act == "relu":
        expected = np.maximum(expected, 0)
    elif act == "silu":
        expected = expected / (1 + np.exp(-expected))
    np.testing.assert_allclose(c, expected, rtol=2e-4, atol=2e-4 * max(1.0, np.sqrt(k)))


def test_pack_round_trips_and_pads_with_zeros():
    w = np.arange(5 * 19, dtype=np.float32).reshape(5, 19)
    packed = pack_weight(w, 8)
    assert packed.shape == (3, 5, 8) and packed.flags.c_contiguous
    np.testing.assert_array_equal(packed[1, 2], w[2, 8:16])      # panel 1, k step 2
    np.testing.assert_array_equal(packed[2, :, 3:], 0)           # columns past n
    np.testing.assert_array_equal(unpack_weight(packed, 19), w)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 150), k=st.integers(0, 700), threads=st.sampled_from([1, 2]),
       small=st.booleans(), bias=st.booleans(), residual=st.booleans(), act=st.sampled_from(["none", "relu", "silu"]),
       seed=st.integers(0, 2**31))
def test_random_shapes_match_numpy(m, n, k, threads, small, bias, residual, act, seed):
    _run(m, n, k, SMALL if small else PARAMS, threads, seed, bias, residual, act)


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("threads", [1, 2])
def test_boundaries_of_each_path(which, threads):
    """One row: whole groups of PANEL_STREAMS panels and a ragged rest (and fewer panels than a
    group); A in place over all k up to a_in_place_rows rows, packed above (one row tile up to mr,
    then several, each asking for its share of the next panel); the rows split over threads from
    threads * mc rows. k over two kc blocks, n no panel divides."""
    p = params = PARAMS if which == "machine" else SMALL
    assert 1 <= p.a_in_place_rows <= p.mr
    group = PANEL_STREAMS * p.nr
    split_n = p.gemv_split_bytes // (4 * (p.kc + 5)) + p.nr + 3   # one row over the GEMV's split size
    for n in (group - 1, group, 2 * group + p.nr + 3, split_n):
        _run(1, n, p.kc + 5, params, threads, n, residual=True, act="silu")
    for m in (2, p.a_in_place_rows, p.a_in_place_rows + 1, p.mr, p.mr + 1, p.skinny_rows, p.skinny_rows + 1,
              threads * p.mc - 1, threads * p.mc, threads * p.mc + p.mr + 1):
        _run(m, 2 * p.nr + 3, 2 * p.kc + 1, params, threads, m, residual=m >= threads * p.mc - 1, act="relu")


def test_packed_operand_checks():
    with pytest.raises(ShapeMismatchError, match="packed in panels of 8 columns"):
        prepacked_dims((2, 5), (3, 5, 8), (2, 20), nr=16)
    with pytest.raises(ShapeMismatchError, match="do not give"):
        prepacked_dims((2, 5), (3, 5, 8), (2, 30))           # 30 columns need 4 panels
    with pytest.raises(ShapeMismatchError, match="3-D"):
        prepacked_dims((2, 5), (5, 24), (2, 24))
    with pytest.raises(ShapeMismatchError, match="float32"):
        pack_weight(np.ones((3, 4)), 8)


@pytest.mark.parametrize("threads", [1, 2])
def test_run_time_choice_beside_openblas_at_its_boundary(threads):
    """Policy WITH_BLAS with the unpacked weight given: up to PREPACKED_ROWS rows run the panels,
    more run OpenBLAS on the weight (where the target has it); without the weight, or under
    GENERATED_ONLY, always the panels. Results equal NumPy on both sides, epilogue included."""
    from backends import blas
    from backends.c.gemm.driver import packed_beats_blas, prepacked_rows, variant_for
    PREPACKED_ROWS = prepacked_rows(PARAMS)
    has_blas = blas.backend() == "openblas"
    rng = np.random.default_rng(threads)
    k, n = 130, 37
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    for m in (1, PREPACKED_ROWS, PREPACKED_ROWS + 1):
        # more rows run what the plain entry's policy runs on the weight: OpenBLAS, or the packed tile
        # where it beats the panels (and OpenBLAS)
        wide = packed_beats_blas(PARAMS) and m > PREPACKED_ROWS
        expected = variant_for(m, PARAMS, 1, blas=True) if (has_blas or wide) and m > PREPACKED_ROWS else \
            "gemv" if m == 1 else "prepacked"
        assert gemm_library.prepacked_variant(m, gemm_library.WITH_BLAS) == expected
        assert gemm_library.prepacked_variant(m, gemm_library.WITH_BLAS, has_unpacked=False) == "prepacked"
        assert gemm_library.prepacked_variant(m, gemm_library.GENERATED_ONLY) == (
            "gemv" if m == 1 else variant_for(m, PARAMS, 1) if wide else "prepacked")
        a = rng.standard_normal((m, k)).astype(np.float32)
        residual = rng.standard_normal((m, n)).astype(np.float32)
        for unpacked in (w, None):
            c = np.full((m, n), np.nan, np.float32)
            gemm_library.gemm(a, pack_weight(w, PARAMS.nr), c, bias=bias, residual=residual, act="silu",
                              threads=threads, prepacked=True, unpacked=unpacked, policy=gemm_library.WITH_BLAS)
            ref = a.astype(np.float64) @ w + bias + residual
            np.testing.assert_allclose(c, ref / (1 + np.exp(-ref)), rtol=2e-4, atol=2e-3)
        for policy in (gemm_library.WITH_BLAS, gemm_library.GENERATED_ONLY):
            if gemm_library.prepacked_variant(m, policy) in ("prepacked", "gemv"):
                continue
            # the choice is what runs: past PREPACKED_ROWS the panels are not read (NaN panels leave no trace)
            c = np.full((m, n), np.nan, np.float32)
            poisoned = np.full_like(pack_weight(w, PARAMS.nr), np.nan)
            gemm_library.gemm(a, poisoned, c, bias=bias, residual=residual, act="silu", threads=threads,
                              prepacked=True, unpacked=w, policy=policy)
            ref = a.astype(np.float64) @ w + bias + residual
            np.testing.assert_allclose(c, ref / (1 + np.exp(-ref)), rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("which", ["machine", "small"])
def test_every_ragged_row_tile(which):
    """Each count of rows a last row tile can have (1..mr-1 and none) behind one or more full tiles (the
    packed kernels per row count, each tile prefetching its rows' share of the next panel); n leaves
    a ragged last panel (whose tiles prefetch nothing), k spans three kc blocks."""
    p = PARAMS if which == "machine" else SMALL
    packed_from = p.skinny_rows + 1
    for m in list(range(p.mr + 1, min(p.skinny_rows, 2 * p.mr) + 1)) + list(range(packed_from, packed_from + p.mr)):
        _run(m, 3 * p.nr + 5, 2 * p.kc + 7, p, 1 + m % 2, m, bias=m % 3 == 0, residual=m % 2 == 0, act="silu")


def test_forced_avx2_build_matches_numpy_at_its_boundaries():
    """The AVX2 build (6x16 tiles, 16-wide panels, one prefetch per k step) on this machine with
    AVX-512 off: every path of the prepacked kernel and its run-time limit beside OpenBLAS."""
    from backends import blas
    from backends.c.gemm.driver import prepacked_rows
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    assert (p.isa, p.mr, p.nr) == ("avx2", 6, 16)
    limit = prepacked_rows(p)
    has_blas = blas.backend() == "openblas"
    assert lib.rs_gen_gemm_prepacked_variant(limit, 1, 1) == 5
    assert lib.rs_gen_gemm_prepacked_variant(limit + 1, 1, 1) == (3 if has_blas else 5)
    rng = np.random.default_rng(7)
    rows = [1, 2, p.a_in_place_rows, p.a_in_place_rows + 1, p.mr, p.mr + 1, p.skinny_rows, p.skinny_rows + 1,
            p.skinny_rows + p.mr - 1, limit, limit + 1]
    for i, m in enumerate(rows + [int(x) for x in rng.integers(1, 3 * p.skinny_rows, 6)]):
        n, k = int(rng.integers(1, 5 * p.nr)), int(rng.integers(1, 2 * p.kc + 9))
        a = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        packed = pack_weight(w, p.nr)
        for unpacked, policy in ((w, 1), (None, 0)):
            c = np.full((m, n), np.nan, np.float32)
            status = lib.rs_gen_gemm_prepacked(m, n, k, a.ctypes.data, packed.ctypes.data,
                                               None if unpacked is None else unpacked.ctypes.data, c.ctypes.data,
                                               bias.ctypes.data, None, 0, 1 + i % 2, policy)
            assert status == 0
            np.testing.assert_allclose(c, a.astype(np.float64) @ w + bias, rtol=2e-4,
                                       atol=2e-4 * max(1.0, np.sqrt(k)))


def test_min_tail_rows_derivation():
    """A last row tile below NR_VECTORS + 2 rows is bound by its loads; at most half of mr moves."""
    from backends.c.gemm.params import NR_VECTORS
    assert PARAMS.min_tail_rows == max(1, min(PARAMS.mr // 2, NR_VECTORS + 2))
    assert SMALL.min_tail_rows == min(SMALL.mr // 2, NR_VECTORS + 2) == 3   # 6-row tiles: 4 + 3, not 6 + 1
    assert 1 <= PARAMS.min_tail_rows <= PARAMS.mr // 2 or PARAMS.mr == 1


@settings(max_examples=25, deadline=None)
@given(tiles=st.integers(1, 12), tail=st.integers(1, 5), n=st.integers(1, 120), k=st.integers(1, 450),
       threads=st.sampled_from([1, 2]), small=st.booleans(), bias=st.booleans(), residual=st.booleans(),
       act=st.sampled_from(["none", "relu", "silu"]), seed=st.integers(0, 2**31))
def test_short_last_row_tiles_take_rows_from_the_tile_before(tiles, tail, n, k, threads, small, bias, residual, act,
                                                             seed):
    """Rows a whole number of tiles plus a short tail (the tail below min_tail_rows takes rows from the
    tile before it; the packed-A path, so more than a_in_place_rows rows; with SMALL's small mc over
    several row blocks, each with its own tail)."""
    p = SMALL if small else PARAMS
    m = tiles * p.mr + min(tail, p.mr - 1)
    if m <= p.a_in_place_rows:
        m += p.mr
    _run(m, n, k, p, threads, seed, bias, residual, act)


def test_forced_avx2_build_short_last_row_tiles():
    """The AVX2 build (6-row tiles: min_tail_rows 3) at every tail below it behind 1..3 whole tiles and over
    row blocks split between threads, with an epilogue."""
    lib, p = forced_avx2_library()
    if lib is None:
        pytest.skip("the compiler cannot target AVX2 + FMA without AVX-512 here")
    assert p.min_tail_rows == 3
    rng = np.random.default_rng(11)
    for m in [q * p.mr + r for q in (1, 2, 3, 10) for r in range(1, p.min_tail_rows + 1)] + [2 * p.mc + 1]:
        n, k = int(rng.integers(1, 4 * p.nr)), int(rng.integers(1, 2 * p.kc + 9))
        a = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        residual = rng.standard_normal((m, n)).astype(np.float32)
        packed = pack_weight(w, p.nr)
        for threads in (1, 2):
            c = np.full((m, n), np.nan, np.float32)
            status = lib.rs_gen_gemm_prepacked(m, n, k, a.ctypes.data, packed.ctypes.data, None,
                                               c.ctypes.data, bias.ctypes.data, residual.ctypes.data, 0, threads, 0)
            assert status == 0
            np.testing.assert_allclose(c, a.astype(np.float64) @ w + bias + residual, rtol=2e-4,
                                       atol=2e-4 * max(1.0, np.sqrt(k)))


@pytest.mark.parametrize("which", ["machine", "small"])
@pytest.mark.parametrize("prepacked", [True, False])
def test_rows_of_a_an_alias_stride_apart(which, prepacked):
    """k a multiple of 1024 floats (rows of A 4 KiB apart, one L1 set) and k +- 1: whole tiles, short
    tails and rows under one tile, on the prepacked path and the per-call packed path, one and two
    threads, with a residual."""
    p = PARAMS if which == "machine" else SMALL
    rng = np.random.default_rng(5)
    for k in (1024, 2048, 1023, 1025):
        for m in (p.a_in_place_rows + 1, p.mr + 1, 2 * p.mr + 3, 3 * p.mr, p.skinny_rows + 5):
            n = int(rng.integers(1, 3 * p.nr))
            a = rng.standard_normal((m, k)).astype(np.float32)
            w = rng.standard_normal((k, n)).astype(np.float32)
            residual = rng.standard_normal((m, n)).astype(np.float32)
            threads = 1 + m % 2
            c = np.full((m, n), np.nan, np.float32)
            gemm_library.gemm(a, pack_weight(w, p.nr) if prepacked else w, c, residual=residual, threads=threads,
                              params=p, prepacked=prepacked)
            np.testing.assert_allclose(c, a.astype(np.float64) @ w + residual, rtol=2e-4, atol=2e-4 * np.sqrt(k))
