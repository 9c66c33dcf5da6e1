"""Machine-parameter detection from compiler macros and /sys, with fake inputs, and the tiles
derived from them."""
from __future__ import annotations

from pathlib import Path

import pytest

from backends.c.gemm.machine import (AVX, AVX2, AVX512, DEFAULT_CACHE_BYTES, DEFAULT_L1D_WAYS, SCALAR, SSE,
                                     MachineParams, cache_sizes, isa_from_macros, l1d_ways, machine_from,
                                     machine_params)
from backends.c.gemm.driver import packed_beats_blas
from backends.c.gemm.params import derive_params, gemm_params


def _macros(*names: str) -> str:
    return "".join(f"#define {name} 1\n" for name in names) + "#define __x86_64__ 1\n"


def _fake_sys(root: Path, entries: list[tuple[str, ...]]) -> Path:
    """index<i> directories of (level, type, size[, ways_of_associativity])."""
    for i, (level, kind, size, *ways) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
        if ways:
            (d / "ways_of_associativity").write_text(ways[0] + "\n")
    return root


@pytest.mark.parametrize("names, isa", [
    (("__SSE2__", "__AVX__", "__AVX2__", "__FMA__", "__AVX512F__"), AVX512),
    (("__SSE2__", "__AVX__", "__AVX2__", "__FMA__"), AVX2),
    (("__SSE2__", "__AVX__", "__AVX2__"), AVX),   # AVX2 without FMA: no fused multiply-add
    (("__SSE2__", "__AVX__"), AVX),
    (("__SSE2__",), SSE),
    ((), SCALAR),
])
def test_isa_from_macros(names, isa):
    assert isa_from_macros(_macros(*names)) == isa


def test_cache_sizes_from_sys(tmp_path):
    root = _fake_sys(tmp_path, [("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "2048K"),
                                ("3", "Unified", "36M")])
    assert cache_sizes(root) == {1: 48 << 10, 2: 2 << 20, 3: 36 << 20}


def test_cache_sizes_missing_or_malformed_fall_back(tmp_path):
    assert cache_sizes(tmp_path / "absent") == DEFAULT_CACHE_BYTES
    root = _fake_sys(tmp_path / "bad", [("1", "Data", "garbage"), ("2", "Unified", "-5K"), ("3", "Unified", "16M")])
    assert cache_sizes(root) == {1: DEFAULT_CACHE_BYTES[1], 2: DEFAULT_CACHE_BYTES[2], 3: 16 << 20}


def test_l1d_ways_from_sys(tmp_path):
    root = _fake_sys(tmp_path / "intel", [("1", "Instruction", "32K", "8"), ("1", "Data", "48K", "12"),
                                          ("2", "Unified", "2048K", "16")])
    assert l1d_ways(root) == 12                   # the data cache's, not the instruction cache's
    assert machine_from(_macros("__AVX512F__"), root, cores=2).l1d_ways == 12
    assert l1d_ways(tmp_path / "absent") == DEFAULT_L1D_WAYS
    unreported = _fake_sys(tmp_path / "old", [("1", "Data", "32K")])
    garbage = _fake_sys(tmp_path / "bad", [("1", "Data", "32K", "many")])
    full = _fake_sys(tmp_path / "full", [("1", "Data", "32K", "0")])   # /sys's 0: fully associative
    assert l1d_ways(unreported) == l1d_ways(garbage) == l1d_ways(full) == DEFAULT_L1D_WAYS


@pytest.mark.parametrize("isa, ways, rows", [(AVX512, 12, 6), (AVX2, 8, 4), (AVX512, 64, 14), (SSE, 1, 1),
                                             (AVX2, 2, 1)])
def test_rows_reading_a_in_place_are_half_the_l1_ways(isa, ways, rows):
    """The prepacked path reads A in place up to half of L1's ways (never more than one register tile,
    never fewer than one row)."""
    params = derive_params(MachineParams(isa, 48 << 10, 2 << 20, 32 << 20, 2, ways))
    assert params.a_in_place_rows == rows <= params.mr


def test_avx2_tiles_from_a_fake_machine(tmp_path):
    root = _fake_sys(tmp_path, [("1", "Data", "32K"), ("2", "Unified", "512K"), ("3", "Unified", "32768K")])
    params = derive_params(machine_from(_macros("__AVX2__", "__FMA__"), root, cores=2))
    # 16 registers: 6 rows x 2 vectors = 12 accumulators + 2 B vectors + 1 broadcast
    assert (params.mr, params.nr, params.lanes) == (6, 16, 8)
    assert params.kc == 256                       # 256 x 16 floats = half of 32 KiB
    assert params.mc == 252                       # 252 x 256 floats <= half of 512 KiB, a multiple of 6
    assert params.nc == 4096                      # capped
    assert params.skinny_rows == 16               # 16 x 256 floats = half of L1
    assert params.skinny_nc == 256
    # the packed tile: 6 x 2 vectors again (12 multiply-adds for 8 loads; 14 x 1 gives 14 for 15, 2 x 4
    # gives 8 for 6); kc: the 6-row A micro-panel in a quarter of L1; mc: the A block in half of L2
    assert (params.packed_mr, params.packed_nr) == (6, 16)
    assert params.packed_kc == 336 and 6 * 336 * 4 <= 32 * 1024 // 4
    assert params.packed_mc == 192 and 192 * 336 * 4 <= 512 * 1024 // 2
    assert not packed_beats_blas(params)          # 1.5 multiply-adds a load: OpenBLAS keeps medium rows


def test_avx512_and_sse_tiles(tmp_path):
    root = _fake_sys(tmp_path, [("1", "Data", "48K"), ("2", "Unified", "1280K"), ("3", "Unified", "1M")])
    wide = derive_params(machine_from(_macros("__AVX512F__"), root, cores=4))
    assert (wide.mr, wide.nr) == (14, 32)         # 28 accumulators of 32 registers
    assert wide.kc == 48 * 1024 // 2 // (32 * 4)
    assert wide.mc % 14 == 0 and wide.mc * wide.kc * 4 <= 1280 * 1024 // 2
    assert wide.nc == 1024 * 1024 // 2 // (wide.kc * 4) // 32 * 32
    # the packed tile: 6 rows x 4 vectors (24 multiply-adds for 10 loads, 2.4 a load; 14 x 2 gives 1.75)
    assert (wide.packed_mr, wide.packed_nr) == (6, 64)
    assert wide.packed_kc == 512                  # capped: 6 x 512 floats is a quarter of 48 KiB
    assert wide.packed_mc % 6 == 0 and wide.packed_mc * 512 * 4 <= 1280 * 1024 // 2
    assert wide.packed().mr == 6 and wide.packed().kc == 512 and wide.packed().isa == wide.isa
    assert packed_beats_blas(wide)
    narrow = derive_params(machine_from(_macros("__SSE2__"), root, cores=1))
    assert (narrow.mr, narrow.nr, narrow.lanes) == (6, 8, 4)


def test_this_machine_is_detected():
    machine = machine_params()
    assert machine.cores >= 1 and machine.l1d_bytes > 0
    params = gemm_params()
    assert params.nr % params.lanes == 0 and params.mc % params.mr == 0 and params.nc % params.nr == 0
    assert params.packed_nr % params.lanes == 0 and params.packed_mc % params.packed_mr == 0
    assert params.nc % params.packed_nr == 0
    assert machine.isa.name in params.describe()
