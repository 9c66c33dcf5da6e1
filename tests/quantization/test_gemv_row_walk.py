"""The row-walk region of the one-token q4 GEMV on 8-bit activations
(``backends/c/quantized_gemv_rows.py``): threads split the 32-row blocks, each walks its blocks' byte
rows in memory order, and the partial outputs are summed after one barrier. Checked against the
NumPy meaning for every team size (larger than the blocks and than ``MAX_PARTS`` included), ragged
columns, both 4-bit formats, with and without an epilogue; and the choice between it and the
register-blocked column split."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.compiler import find_compiler
from backends.c.quantized_gemv import (AVX2, ColumnEpilogue, VectorFeatures, avx512_regions_enabled,
                                      detect_features, gemv_source)
from backends.c.quantized_gemv_rows import MAX_PARTS, ROW_WALK_MARK, ROW_WALK_WIDE_MARK, fits_row_walk, rows_region_c
from backends.c.quantized_gemv_rows_q8 import ROW_WALK_Q8_MARK, ROW_WALK_Q8_VNNI_MARK, TILE
from relaxscript.quantization import dequantize_numpy, fake_quantize_numpy, quantize_numpy
from relaxscript.transform.quantize_activations import QuantizeActivations

from .native_operands import run_kernel
from .test_dequantize_op import linear_module

HAS_AVX2 = detect_features().name in ("avx2", "avx512")
needs_avx2 = pytest.mark.skipif(not HAS_AVX2, reason="the row walk is AVX2 code; this machine's gcc -march=native "
                                "has no AVX2 (the float kernel runs, tested elsewhere)")
# y = product + h[c] * 2: an epilogue reading another input at the column
RESIDUAL = ColumnEpilogue(declarations=("const float* restrict h = (const float*)rs_buffers[5];",),
                          statements=("const float rs_twice = h[rs_col] * 2.0f;",),
                          result="rs_prod + rs_twice")


def compiled(tmp_dir, fmt: str, rows: int, cols: int, epilogue: bool, flags: tuple = ()):
    """The generated kernel as a shared library whose team size the test sets."""
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    prelude = ("#include <stdint.h>\n#include <string.h>\nstatic int rs_team_size = 1;\n"
               "void rs_set_team(int n) { rs_team_size = n; }\n"
               "static inline int rs_threads(void) { return rs_team_size; }\n")
    source = gemv_source("rs_gemv", fmt, rows, cols, roles, detect_features(),
                         epilogue=RESIDUAL if epilogue else None, activations="q8_0")
    path = tmp_dir / f"gemv_{fmt}_{rows}_{cols}_{int(epilogue)}_{len(flags)}.c"
    path.write_text(prelude + source)
    subprocess.run([find_compiler(), "-O2", "-march=native", *flags, "-fopenmp", "-shared", "-fPIC", str(path),
                    "-o", str(path.with_suffix(".so"))], check=True, capture_output=True)
    return ctypes.CDLL(str(path.with_suffix(".so"))), roles, source


@needs_avx2
@settings(max_examples=10, deadline=None)
@given(fmt=st.sampled_from(["q4_1", "q4_0"]), blocks=st.sampled_from([1, 3, 18, 48]),
       cols=st.sampled_from([32, 45, 96, 577, 1536]), team=st.integers(1, MAX_PARTS + 3),
       epilogue=st.booleans(), seed=st.integers(0, 2**16), wide=st.booleans())
def test_any_team_size_sums_every_block_once(tmp_path_factory, fmt, blocks, cols, team, epilogue, seed, wide):
    """Teams of one, of more threads than blocks and of more than MAX_PARTS partials; ragged
    columns (the scalar tail); y starts as NaN, so a column no thread wrote would show.
    ``wide=False`` builds the AVX2 walk on an AVX-512 machine (``-DRS_Q_NO_AVX512``)."""
    rows = 32 * blocks
    library, roles, source = compiled(tmp_path_factory.mktemp("rows"), fmt, rows, cols, epilogue,
                                      () if wide else ("-DRS_Q_NO_AVX512",))
    assert ROW_WALK_MARK in source
    assert (ROW_WALK_WIDE_MARK in source) == (detect_features().name == "avx512" and cols >= 64
                                              and avx512_regions_enabled())
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = (rng.standard_normal(rows) * 3).astype(np.float32)
    if seed % 3 == 0:
        x[:32] = 0                                    # a zero block: scale 0, codes 0
    h = rng.standard_normal(cols).astype(np.float32)
    y = np.full(cols, np.nan, np.float32)
    run_kernel(library, tensors, roles, x, y, h, team)
    expected = fake_quantize_numpy(x[None]).astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
    expected = expected[0] + (2.0 * h if epilogue else 0.0)
    np.testing.assert_allclose(y, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows))


@needs_avx2
@settings(max_examples=8, deadline=None)
@given(blocks=st.sampled_from([1, 2, 18]), cols=st.sampled_from([15, 16, 45, TILE + 37, 2 * TILE + 4096 + 5]),
       team=st.integers(1, 5), epilogue=st.booleans(), seed=st.integers(0, 2**16), vnni=st.booleans())
def test_q8_pair_walk_any_team_size_equals_numpy(tmp_path_factory, blocks, cols, team, epilogue, seed, vnni):
    """q8_0: column runs per thread, several tiles per thread, ragged ends (the scalar tail),
    teams larger than the 16-column groups; y starts as NaN. ``vnni=False`` builds the AVX2 pair walk
    on a VNNI machine (``-DRS_Q_NO_AVX512``); codes of -128 and 127 appear (the VNNI walk flips them
    to unsigned)."""
    rows = 32 * blocks
    library, roles, source = compiled(tmp_path_factory.mktemp("q8rows"), "q8_0", rows, cols, epilogue,
                                      () if vnni else ("-DRS_Q_NO_AVX512",))
    assert ROW_WALK_Q8_MARK in source
    assert (ROW_WALK_Q8_VNNI_MARK in source) == (detect_features().name == "avx512" and avx512_regions_enabled())
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), "q8_0")
    tensors[0][rng.random(tensors[0].shape) < 0.05] = -128
    tensors[0][rng.random(tensors[0].shape) < 0.05] = 127
    x = (rng.standard_normal(rows) * 3).astype(np.float32)
    h = rng.standard_normal(cols).astype(np.float32)
    y = np.full(cols, np.nan, np.float32)
    run_kernel(library, tensors, roles, x, y, h, team)
    expected = fake_quantize_numpy(x[None]).astype(np.float64) @ dequantize_numpy(*tensors, format="q8_0")
    expected = expected[0] + (2.0 * h if epilogue else 0.0)
    np.testing.assert_allclose(y, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows))


def test_row_walk_serves_narrow_q4_layers_only():
    """Narrow q4 layers (per-column state within half of L1) walk rows split by blocks; q8_0 walks
    row pairs over column tiles; wide q4 layers and layers narrower than one 32-column group keep
    the register-blocked column split."""
    features = VectorFeatures(*AVX2, 32 << 10)
    roles = {"codes": 0, "scale": 1, "min": 2, "x": 3, "y": 4}
    q8_roles = {"codes": 0, "scale": 1, "x": 2, "y": 3}
    assert fits_row_walk(1536, 32 << 10) and fits_row_walk(2048, 32 << 10)
    assert not fits_row_walk(2049, 32 << 10) and not fits_row_walk(31, 32 << 10)
    assert ROW_WALK_MARK in gemv_source("f", "q4_1", 576, 1536, roles, features, activations="q8_0")
    assert ROW_WALK_MARK in gemv_source("f", "q4_0", 1536, 576, q8_roles, features, activations="q8_0")
    q8 = gemv_source("f", "q8_0", 576, 1536, q8_roles, features, activations="q8_0")
    assert ROW_WALK_MARK not in q8 and ROW_WALK_Q8_MARK in q8
    wide = gemv_source("f", "q4_1", 576, 4096, roles, features, activations="q8_0")
    assert ROW_WALK_MARK not in wide and ROW_WALK_Q8_MARK not in wide
    assert ROW_WALK_MARK not in gemv_source("f", "q4_1", 576, 20, roles, features, activations="q8_0")
    assert ROW_WALK_MARK not in gemv_source("f", "q4_1", 576, 1536, roles, features)   # float activations


def test_row_walk_can_be_switched_off(monkeypatch):
    """RELAXSCRIPT_GEMV_ROW_WALK=0: the column split (what bench_gemv_bound.py compares with)."""
    features = VectorFeatures(*AVX2, 32 << 10)
    roles = {"codes": 0, "scale": 1, "min": 2, "x": 3, "y": 4}
    monkeypatch.setenv("RELAXSCRIPT_GEMV_ROW_WALK", "0")
    assert ROW_WALK_MARK not in gemv_source("f", "q4_1", 576, 1536, roles, features, activations="q8_0")
    q8_roles = {"codes": 0, "scale": 1, "x": 2, "y": 3}
    assert ROW_WALK_Q8_MARK not in gemv_source("f", "q8_0", 576, 1536, q8_roles, features, activations="q8_0")


def test_avx512_walks_are_emitted_for_avx512_only_and_can_be_switched_off(monkeypatch):
    """The q8_0 VNNI walk and the 512-bit q4 walk sit under their compile-time guards beside the AVX2
    walks (AVX-512 sources only; the q4 one for layers of 64 columns or more);
    RELAXSCRIPT_GEMV_AVX512=0 leaves them out."""
    from backends.c.quantized_gemv import AVX512
    from backends.c.quantized_gemv_rows import WIDE_GUARD
    from backends.c.quantized_gemv_rows_q8 import VNNI_GUARD
    monkeypatch.delenv("RELAXSCRIPT_GEMV_AVX512", raising=False)
    q8_roles = {"codes": 0, "scale": 1, "x": 2, "y": 3}
    q4_roles = {"codes": 0, "scale": 1, "min": 2, "x": 3, "y": 4}
    big, small = VectorFeatures(*AVX512, 48 << 10), VectorFeatures(*AVX2, 32 << 10)

    def sources():
        return (gemv_source("f", "q8_0", 576, 4096, q8_roles, big, activations="q8_0"),
                gemv_source("f", "q4_1", 576, 1536, q4_roles, big, activations="q8_0"))
    q8, q4 = sources()
    assert ROW_WALK_Q8_VNNI_MARK in q8 and f"#if {VNNI_GUARD}" in q8 and ROW_WALK_Q8_MARK in q8
    assert ROW_WALK_WIDE_MARK in q4 and f"#if {WIDE_GUARD}" in q4 and "1 byte row(s) per pass" in q4
    assert ROW_WALK_WIDE_MARK not in gemv_source("f", "q4_1", 576, 48, q4_roles, big, activations="q8_0")
    narrow = gemv_source("f", "q8_0", 576, 4096, q8_roles, small, activations="q8_0")
    assert ROW_WALK_Q8_VNNI_MARK not in narrow and ROW_WALK_Q8_MARK in narrow
    assert ROW_WALK_WIDE_MARK not in gemv_source("f", "q4_1", 576, 1536, q4_roles, small, activations="q8_0")
    monkeypatch.setenv("RELAXSCRIPT_GEMV_AVX512", "0")
    q8, q4 = sources()
    assert ROW_WALK_Q8_VNNI_MARK not in q8 and ROW_WALK_Q8_MARK in q8
    assert ROW_WALK_WIDE_MARK not in q4 and ROW_WALK_MARK in q4


def test_row_walk_rejects_what_it_cannot_compute():
    with pytest.raises(ValueError, match="not a 4-bit format"):
        rows_region_c("q8_0", 64, 64, 0, False, [], 64)
    with pytest.raises(ValueError, match="rows per pass"):
        rows_region_c("q4_1", 64, 64, 0, False, [], 64, rows_per_pass=3)


@needs_avx2
@pytest.mark.parametrize("rows_per_pass", [2, 4, 8])
def test_several_rows_per_pass_equal_numpy(tmp_path, monkeypatch, rows_per_pass):
    """The measured-and-rejected variants (more rows side by side) still compute the product."""
    import backends.c.quantized_gemv_rows as rows_module
    original = rows_module.rows_region_c
    monkeypatch.setattr(rows_module, "rows_region_c",
                        lambda *a, **kw: original(*a, **kw, rows_per_pass=rows_per_pass))
    library, roles, source = compiled(tmp_path, "q4_1", 96, 77, epilogue=False, flags=("-DRS_Q_NO_AVX512",))
    assert f"{rows_per_pass} byte row(s) per pass" in source
    rng = np.random.default_rng(rows_per_pass)
    tensors = quantize_numpy(rng.standard_normal((96, 77)), "q4_1")
    x = rng.standard_normal(96).astype(np.float32)
    y = np.full(77, np.nan, np.float32)
    run_kernel(library, tensors, roles, x, y, team=2)
    expected = fake_quantize_numpy(x[None]).astype(np.float64) @ dequantize_numpy(*tensors, format="q4_1")
    np.testing.assert_allclose(y, expected[0], rtol=2e-4, atol=2e-4 * np.sqrt(96))


@pytest.mark.parametrize("n", [1, 3])
def test_model_layer_with_symbolic_tokens_equals_the_interpreter(n):
    """Through the pipeline: a q4_1 linear layer on rounded activations whose token count is
    symbolic, bound to 1 (the one-token GEMV, row walk) and 3 (the GEMM)."""
    mod = QuantizeActivations()(linear_module("q4_1", 96, 160, tokens='"n"', bias=True))
    built = rx.build(mod, target="c")
    rng = np.random.default_rng(n)
    tensors = quantize_numpy(rng.standard_normal((96, 160)), "q4_1")
    b = rng.standard_normal(160).astype(np.float32)
    x = rng.standard_normal((n, 96)).astype(np.float32)
    got = rx.VirtualMachine(built)["main"](x, *tensors, b)
    expected = fake_quantize_numpy(x).astype(np.float64) @ dequantize_numpy(*tensors, format="q4_1") + b
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-3)
    np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors, b), expected, rtol=2e-4, atol=2e-3)
