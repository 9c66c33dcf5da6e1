"""Float16 block scales (GGUF's own, ``scale_dtype="float16"``) in the generated quantized kernels:
the rules mark these products like float32-scale ones (with ``scale_dtype`` in the spec), and every
kernel (the float GEMV, the 8-bit-activation register-blocked, row-walk and q8_0 pair-walk GEMVs,
the prefill GEMM) equals NumPy's dequantize-then-matmul on random blocks and ragged sizes, with
F16C conversions and with the portable bit conversion (``-DRS_Q_NO_F16C`` or ``-mno-f16c``)."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.codegen import HALF_TO_FLOAT_C
from backends.c.compiler import find_compiler
from backends.c.quantized_gemv import AVX2, AVX512, SSE, ScaleLoads, VectorFeatures, detect_features, gemv_source
from backends.c.quantized_gemv_rows import MAX_PARTS, ROW_WALK_MARK
from backends.c.quantized_gemv_rows_q8 import ROW_WALK_Q8_MARK
from relaxscript.quantization import dequantize_numpy, fake_quantize_numpy, quantize_numpy
from relaxscript.transform.quantize_activations import QuantizeActivations
from tensorir.schedule_rules.quantized import QUANTIZED_GEMV_ATTR
from tensorir.schedule_rules.quantized_gemm import QUANTIZED_GEMM_ATTR

from .test_dequantize_op import linear_module, scheduled_module
from .test_generated_gemv import gcc_macros

FORMATS = ["q4_1", "q4_0", "q8_0"]
HAS_AVX2 = detect_features().name in ("avx2", "avx512")
F16_MARK = "float16 scales */"


def spec_of(mod, attr):
    func = next(iter(scheduled_module(mod).prim_funcs.values()))
    return func.attrs.get(attr)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rounded", [False, True])
def test_float16_scale_products_are_marked_with_their_dtype(fmt, rounded):
    def module(tokens, scale_dtype):
        mod = linear_module(fmt, 96, 40, tokens=tokens, scale_dtype=scale_dtype)
        return QuantizeActivations()(mod) if rounded else mod
    gemv = spec_of(module("1", "float16"), QUANTIZED_GEMV_ATTR)
    gemm = spec_of(module('"n"', "float16"), QUANTIZED_GEMM_ATTR)
    assert gemv["scale_dtype"] == "float16" and gemm["scale_dtype"] == "float16"
    assert (gemv["rows"], gemv["cols"]) == (96, 40) and (gemm["rows"], gemm["cols"]) == (96, 40)
    assert ("activations" in gemv) == rounded
    # float32 scales: no entry (the kernels' default), as before
    assert "scale_dtype" not in spec_of(module("1", "float32"), QUANTIZED_GEMV_ATTR)
    assert "scale_dtype" not in spec_of(module('"n"', "float32"), QUANTIZED_GEMM_ATTR)


def run_and_check(mod, fmt, rows, cols, token_counts, rounded, seed, marks=()):
    """Build ``mod`` for C, check its source names the float16-scale kernel (and ``marks``), and
    compare every token count against NumPy; the library's source."""
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, "float16")
    assert tensors[1].dtype == np.float16
    built = rx.build(mod, target="c")
    source = built.c_library.source
    assert F16_MARK in source
    for mark in marks:
        assert mark in source
    run = rx.VirtualMachine(built)["main"]
    for count in token_counts:
        x = (rng.standard_normal((count, rows)) * 3).astype(np.float32)
        x[:, :32] = 0 if seed % 4 == 0 else x[:, :32]          # now and then a zero block
        xx = fake_quantize_numpy(x) if rounded else x
        expected = xx.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
        np.testing.assert_allclose(run(x, *tensors), expected, rtol=2e-4, atol=4e-4 * np.sqrt(rows))
    return source


def module_for(fmt, rows, cols, tokens, rounded):
    mod = linear_module(fmt, rows, cols, tokens=tokens, scale_dtype="float16")
    return QuantizeActivations()(mod) if rounded else mod


@settings(max_examples=10, deadline=None)
@given(fmt=st.sampled_from(FORMATS), blocks=st.sampled_from([1, 3, 18]), cols=st.integers(1, 300),
       rounded=st.booleans(), seed=st.integers(0, 2**16))
def test_one_token_gemv_with_float16_scales_equals_numpy(fmt, blocks, cols, rounded, seed):
    """The float kernel (exact inputs) and the 8-bit-activation kernels (row walk for q4, pair
    walk for q8_0 where the machine has AVX2), ragged columns."""
    rows = 32 * blocks
    run_and_check(module_for(fmt, rows, cols, "1", rounded), fmt, rows, cols, [1], rounded, seed)


@pytest.mark.parametrize("fmt", FORMATS)
def test_register_blocked_int8_gemv_with_float16_scales_equals_numpy(monkeypatch, fmt):
    """RELAXSCRIPT_GEMV_ROW_WALK=0: the register-blocked integer kernel (wide q4 layers use it)."""
    monkeypatch.setenv("RELAXSCRIPT_GEMV_ROW_WALK", "0")
    for rows, cols in ((96, 45), (576, 300)):
        source = run_and_check(module_for(fmt, rows, cols, "1", True), fmt, rows, cols, [1], True, seed=cols)
        assert ROW_WALK_MARK not in source and ROW_WALK_Q8_MARK not in source
        if HAS_AVX2:
            assert "_mm256_madd" in source


@pytest.mark.skipif(not HAS_AVX2, reason="the row and pair walks are AVX2 code")
@pytest.mark.parametrize("fmt, cols, mark", [("q4_1", 1536, ROW_WALK_MARK), ("q4_0", 577, ROW_WALK_MARK),
                                             ("q8_0", 2048 + 45, ROW_WALK_Q8_MARK)])
def test_row_and_pair_walks_read_float16_scales(fmt, cols, mark):
    run_and_check(module_for(fmt, 576, cols, "1", True), fmt, 576, cols, [1], True, seed=cols, marks=[mark])


@settings(max_examples=8, deadline=None)
@given(fmt=st.sampled_from(FORMATS), blocks=st.sampled_from([1, 3, 48]), cols=st.integers(1, 90),
       rounded=st.booleans(),
       tokens=st.lists(st.sampled_from([1, 2, 7, 13, 33]), min_size=1, max_size=3, unique=True),
       seed=st.integers(0, 2**16))
def test_prefill_gemm_with_float16_scales_equals_numpy(fmt, blocks, cols, rounded, tokens, seed):
    """Several tokens: the panels decode float16 scales; one token calls the GEMV inside."""
    rows = 32 * blocks
    source = run_and_check(module_for(fmt, rows, cols, '"n"', rounded), fmt, rows, cols, tokens, rounded, seed)
    assert f"{fmt} gemm n x {rows} x {cols}" in source


@pytest.mark.parametrize("flag", ["-DRS_Q_NO_F16C", "-mno-f16c"])
def test_the_portable_conversion_without_f16c(monkeypatch, flag):
    """Without F16C (or with it turned off) the scales widen by the prelude's exact bit
    conversion: every kernel kind, special values among the scales (subnormal halves, the
    largest half, signed zeros) included."""
    from backends.c import compiler
    cases = [("q4_1", 96, 300, "1", False), ("q4_1", 576, 1536, "1", True), ("q8_0", 64, 2100, "1", True),
             ("q4_0", 64, 37, '"n"', False), ("q4_1", 96, 70, '"n"', True)]
    with_f16c = rx.build(module_for(*cases[0][:4], cases[0][4]), target="c").c_library.path
    monkeypatch.setattr(compiler, "DEFAULT_FLAGS", compiler.DEFAULT_FLAGS + (flag,))
    rng = np.random.default_rng(5)
    specials = np.array([6.0e-8, -6.1e-5, 65504.0, -0.0, 0.0, 1.5e-7, -2.0**-14], np.float16)
    for number, (fmt, rows, cols, tokens, rounded) in enumerate(cases):
        built = rx.build(module_for(fmt, rows, cols, tokens, rounded), target="c")
        if number == 0:
            assert built.c_library.path != with_f16c     # compiled under the flag (another binary)
        assert F16_MARK in built.c_library.source
        tensors = list(quantize_numpy(rng.standard_normal((rows, cols)), fmt, "float16"))
        tensors[1] = tensors[1].copy()
        tensors[1][0, :len(specials)] = specials[:cols]
        if fmt == "q4_1":
            tensors[2] = tensors[2].copy()
            tensors[2][-1, :len(specials)] = specials[::-1][:cols]
        x = rng.standard_normal((1 if tokens == "1" else 5, rows)).astype(np.float32)
        weight = dequantize_numpy(*tensors, format=fmt)
        expected = (fake_quantize_numpy(x) if rounded else x).astype(np.float64) @ weight
        got = np.asarray(rx.VirtualMachine(built)["main"](x, *tensors))
        # per column: float32 sums of terms as large as the column's largest weight
        tolerance = 2e-4 * np.abs(expected) + 4e-4 * np.sqrt(rows) * np.maximum(1.0, np.abs(weight).max(axis=0))
        assert np.all(np.abs(got - expected) <= tolerance), (fmt, rows, cols, np.abs(got - expected).max())


def compile_standalone(tmp_path, source: str, flags: list[str], name: str, shared: bool = False):
    prelude = ("#include <stdint.h>\n#include <string.h>\nstatic int rs_team_size = 1;\n"
               "void rs_set_team(int n) { rs_team_size = n; }\n"
               "static inline int rs_threads(void) { return rs_team_size; }\n" + HALF_TO_FLOAT_C)
    path = tmp_path / f"{name}.c"
    path.write_text(prelude + source)
    out = path.with_suffix(".so" if shared else ".o")
    mode = ["-shared", "-fPIC"] if shared else ["-c"]
    result = subprocess.run([find_compiler(), "-O3", *flags, "-fopenmp", *mode, str(path), "-o", str(out),
                             "-Werror=implicit-function-declaration"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("kind, flags", [(AVX2, ["-march=x86-64", "-mavx2", "-mfma"]),
                                         (AVX2, ["-march=x86-64", "-mavx2", "-mfma", "-mf16c"]),
                                         (AVX512, ["-march=x86-64", "-mavx512f", "-mavx512bw"]),
                                         (AVX512, ["-march=x86-64", "-mavx512f", "-mavx512bw", "-mf16c"]),
                                         (SSE, ["-march=x86-64", "-msse2"]), (SSE, ["-march=x86-64", "-mf16c"])])
@pytest.mark.parametrize("fmt", FORMATS)
def test_float16_scale_sources_compile_for_each_feature_set(tmp_path, kind, flags, fmt):
    """Each instruction set's source, with and without F16C, float and 8-bit-activation kernels;
    with F16C the conversion instruction is used, without it the bit conversion."""
    features = VectorFeatures(*kind, 32 << 10)
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    source = "\n".join(gemv_source(f"k{i}", fmt, 96, 100, roles, features, activations=act, scale_dtype="float16")
                       for i, act in enumerate((None, "q8_0")))
    obj = compile_standalone(tmp_path, source, flags, "gemv")
    disassembly = subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True).stdout
    has_f16c = "__F16C__" in gcc_macros(flags)
    if disassembly:
        assert ("vcvtph2ps" in disassembly) == has_f16c


@pytest.mark.skipif(not HAS_AVX2, reason="the row walk is AVX2 code")
@settings(max_examples=8, deadline=None)
@given(fmt=st.sampled_from(FORMATS), blocks=st.sampled_from([1, 3, 18]), cols=st.sampled_from([32, 45, 577, 2100]),
       team=st.integers(1, MAX_PARTS + 2), no_f16c=st.booleans(), seed=st.integers(0, 2**16))
def test_any_team_size_reads_float16_scales(tmp_path_factory, fmt, blocks, cols, team, no_f16c, seed):
    """The 8-bit-activation kernels built standalone with any team size (more threads than
    blocks and than MAX_PARTS partials), F16C or the bit conversion; y starts as NaN."""
    rows = 32 * blocks
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    source = gemv_source("rs_gemv", fmt, rows, cols, roles, detect_features(), activations="q8_0",
                         scale_dtype="float16")
    flags = ["-march=native"] + (["-DRS_Q_NO_F16C"] if no_f16c else [])
    library = ctypes.CDLL(str(compile_standalone(tmp_path_factory.mktemp("f16"), source, flags, "gemv", True)))
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, "float16")
    x = (rng.standard_normal(rows) * 3).astype(np.float32)
    y = np.full(cols, np.nan, np.float32)
    operands = {"codes": tensors[0], "scale": tensors[1], "x": x, "y": y} | \
        ({"min": tensors[2]} if fmt == "q4_1" else {})
    pointers = (ctypes.c_void_p * 5)()
    for role, position in roles.items():
        pointers[position] = operands[role].ctypes.data
    library.rs_set_team(team)
    assert library.rs_gemv(pointers, None) == 0
    expected = fake_quantize_numpy(x[None]).astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
    np.testing.assert_allclose(y, expected[0], rtol=2e-4, atol=2e-4 * np.sqrt(rows))


def test_scale_loads_name_the_dtype():
    assert ScaleLoads().c_type == "float" and ScaleLoads("float16").c_type == "uint16_t"
    assert ScaleLoads("float16").scalar("s[0]") == "rs_half_to_float(s[0])"
    assert ScaleLoads().helpers(detect_features()) == ""
    with pytest.raises(ValueError, match="float32 or float16"):
        ScaleLoads("bfloat16")
    with pytest.raises(ValueError, match="float32 or float16"):
        gemv_source("f", "q8_0", 32, 8, {"codes": 0, "scale": 1, "x": 2, "y": 3}, detect_features(),
                    scale_dtype="float64")


def test_bench_gemv_bound_compares_scale_dtypes(capsys):
    """The benchmark's --scales compare driver builds and times both kernels (a smoke run)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gemv_bound.py"
    spec = importlib.util.spec_from_file_location("bench_gemv_bound", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--scales", "compare", "--only", "o_proj", "--threads", "1", "--calls", "5", "--stream-mb", "2"])
    out = capsys.readouterr().out
    assert "kernel float16, baseline (f32 sc) float32" in out
    row = next(line for line in out.splitlines() if line.startswith("o_proj"))
    # 576 x 576 q4_1: codes 165888 bytes + float16 scales and mins 2 * 2 * 18 * 576
    assert row.split()[2] == f"{(165888 + 4 * 18 * 576) / 1e6:.2f}"
