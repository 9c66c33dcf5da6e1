"""The one-token quantized GEMV on 8-bit activations (``matmul(fake_quantize(x), dequantize(...))``,
backends/c/quantized_gemv_int8.py): the rule marks it, the generated kernel (integer dot
products under AVX2, the float kernel on the rounded input otherwise) equals the NumPy
meaning on random shapes with ragged columns, every format, with and without epilogues;
and the prefill GEMM keeps working on the rounded input."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.quantized_gemv import AVX2, AVX512, SSE, VectorFeatures, detect_features, gemv_source
from relaxscript.quantization import dequantize_numpy, fake_quantize_numpy, quantize_numpy
from relaxscript.transform.quantize_activations import QuantizeActivations
from tensorir.schedule_rules.quantized import QUANTIZED_GEMV_ATTR

from .test_dequantize_op import linear_module, scheduled_module
from .test_generated_gemv import EPILOGUES, compile_gemv_source, epilogue_inputs, epilogue_module, gcc_macros

FAST = settings(max_examples=8, deadline=None)
FORMATS = ["q4_1", "q8_0", "q4_0"]
INTEGER_DOT = {"q4_1": "_mm256_maddubs_epi16", "q4_0": "_mm256_maddubs_epi16", "q8_0": "_mm256_madd_epi16"}


def rounded(mod):
    return QuantizeActivations()(mod)


def expected_product(x, tensors, fmt):
    return fake_quantize_numpy(x).astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rounded_one_token_product_is_marked_with_the_activation_format(fmt):
    mod = scheduled_module(rounded(linear_module(fmt, 96, 40, tokens="1")))
    func = next(iter(mod.prim_funcs.values()))
    spec = func.attrs.get(QUANTIZED_GEMV_ATTR)
    assert spec["activations"] == "q8_0" and (spec["rows"], spec["cols"]) == (96, 40)
    # the kernel reads the function's input x itself, not the rounded intermediate
    assert func.buffer_params[spec["roles"]["x"]].name == "x"
    plain = next(iter(scheduled_module(linear_module(fmt, 96, 40, tokens="1")).prim_funcs.values()))
    assert "activations" not in plain.attrs[QUANTIZED_GEMV_ATTR]


def check(mod, fmt, rows, cols, kind, seed, integer_dot: bool):
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = (rng.standard_normal((1, rows)) * 3).astype(np.float32)
    x[0, :32] = 0 if seed % 3 == 0 else x[0, :32]      # now and then a zero block
    others = epilogue_inputs(kind, cols, rng) if kind else {}
    z = expected_product(x, tensors, fmt)
    expected = EPILOGUES[kind][2](z, {k: v.astype(np.float64) for k, v in others.items()}) if kind else z
    built = rx.build(mod, target="c")
    source = built.c_library.source
    assert f"{fmt} gemv {rows} x {cols}" in source and "activations rounded to q8_0" in source
    assert (INTEGER_DOT[fmt] in source) == integer_dot
    got = rx.VirtualMachine(built)["main"](x, *tensors, *others.values())
    tolerance = dict(rtol=2e-4, atol=2e-4 * np.sqrt(rows))
    np.testing.assert_allclose(got, expected, **tolerance)
    np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors, *others.values()), expected, **tolerance)


def native_has_avx2() -> bool:
    return detect_features().name in ("avx2", "avx512")


@FAST
@given(fmt=st.sampled_from(FORMATS), blocks=st.sampled_from([1, 3, 18]), cols=st.integers(1, 300),
       kind=st.sampled_from([None, *sorted(EPILOGUES)]), seed=st.integers(0, 2**16))
def test_integer_dot_gemv_equals_numpy(fmt, blocks, cols, kind, seed):
    """Ragged columns (not a multiple of the 32- or 64-column step), K = 32, 96 or 576, every
    epilogue kind, in C (integer dot products where the machine has AVX2) and in the
    interpreter."""
    rows = 32 * blocks
    mod = rounded(epilogue_module(fmt, rows, cols, kind) if kind else linear_module(fmt, rows, cols, tokens="1"))
    check(mod, fmt, rows, cols, kind, seed, integer_dot=native_has_avx2())


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_integer_dot_the_float_kernel_runs_on_the_rounded_input(monkeypatch, fmt):
    """What a machine without AVX2 runs (forced here with RELAXSCRIPT_INT8_DOT=0)."""
    monkeypatch.setenv("RELAXSCRIPT_INT8_DOT", "0")
    check(rounded(linear_module(fmt, 96, 77, tokens="1")), fmt, 96, 77, None, 5, integer_dot=False)
    check(rounded(epilogue_module(fmt, 64, 40, "gate")), fmt, 64, 40, "gate", 6, integer_dot=False)


def test_wide_q8_rows_a_page_apart_split_among_threads():
    """The LM head's case: rows a multiple of 4 KiB apart (prefetched along the row), several
    tiles per thread and a ragged end."""
    rows, cols = 64, 4096 + 4 * 1024 + 37
    check(rounded(linear_module("q8_0", rows, cols, tokens="1")), "q8_0", rows, cols, None, 11,
          integer_dot=native_has_avx2())


@pytest.mark.parametrize("fmt", FORMATS)
def test_prefill_gemm_on_rounded_rows_equals_numpy(fmt):
    """Several tokens (symbolic n bound to several values): the generated GEMM gathers the
    rounded rows (n == 1 inside it calls the one-token kernel on the gathered row)."""
    mod = rounded(linear_module(fmt, 96, 70, tokens='"n"', bias=True, activation=True))
    built = rx.build(mod, target="c")
    assert "c.quantized_gemm" in scheduled_module(mod).script() or " gemm " in built.c_library.source
    vm = rx.VirtualMachine(built)
    rng = np.random.default_rng(4)
    tensors = quantize_numpy(rng.standard_normal((96, 70)), fmt)
    b = rng.standard_normal(70).astype(np.float32)
    for n in (1, 2, 5, 17):
        x = rng.standard_normal((n, 96)).astype(np.float32)
        z = expected_product(x, tensors, fmt) + b
        np.testing.assert_allclose(vm["main"](x, *tensors, b), z / (1 + np.exp(-z)), rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("kind, flags", [(AVX2, ["-mavx2", "-mfma"]), (AVX512, ["-mavx512f", "-mavx512bw"]),
                                         (SSE, ["-msse2"])])
@pytest.mark.parametrize("fmt", FORMATS)
def test_rounded_source_for_each_feature_set_compiles(tmp_path, kind, flags, fmt):
    """AVX-512 machines run the AVX2 integer code; SSE gets only the float kernel."""
    features = VectorFeatures(*kind, 32 << 10)
    assert features_name(flags) == kind[0]
    source = compile_gemv_source(tmp_path, fmt, features, flags, activations="q8_0")
    assert (INTEGER_DOT[fmt] in source) == (kind is not SSE)


def features_name(flags) -> str:
    from backends.c.quantized_gemv import features_from_macros
    return features_from_macros(gcc_macros(["-march=x86-64", *flags])).name


def test_unknown_activation_format_is_an_error():
    with pytest.raises(ValueError, match="unsupported activation format 'q4_1'"):
        gemv_source("f", "q8_0", 64, 8, {}, VectorFeatures(*AVX2, 32 << 10), activations="q4_1")


def test_prefill_gemm_rounds_rows_gathered_through_layout_blocks():
    """The attention output's regrouping ``(heads, n, d) -> (n, heads * d)`` in front of the
    rounding and the product (o_proj + residual): the kernel gathers the unrounded rows and
    rounds each 32-value block once, for one token (the GEMV) and several."""
    mod = QuantizeActivations()(rx.IRModule({"main": rx.from_source('''
from relaxscript import R
@R.function
def main(a: R.Tensor((3, "n", 32), "float32"), qd: R.Tensor((48, 40), "uint8"), qs: R.Tensor((3, 40), "float32"),
         qm: R.Tensor((3, 40), "float32"), h: R.Tensor(("n", 40), "float32")):
    n = T.int64()
    with R.dataflow():
        x = R.reshape(R.permute_dims(a, [1, 0, 2]), (n, 96))
        y = R.add(h, R.matmul(x, R.dequantize(qd, qs, qm, format="q4_1")))
        R.output(y)
    return y
''')}))
    built = rx.build(mod, target="c")
    assert "activations rounded to q8_0" in built.c_library.source and "rs_xq" in built.c_library.source
    vm = rx.VirtualMachine(built)
    rng = np.random.default_rng(0)
    tensors = quantize_numpy(rng.standard_normal((96, 40)), "q4_1")
    for n in (1, 2, 7):
        a = rng.standard_normal((3, n, 32)).astype(np.float32)
        h = rng.standard_normal((n, 40)).astype(np.float32)
        x = a.transpose(1, 0, 2).reshape(n, 96)
        np.testing.assert_allclose(vm["main"](a, *tensors, h), h + expected_product(x, tensors, "q4_1"),
                                   rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("tokens", ['"n"', "1"])
def test_every_pipeline_stage_of_a_rounded_quantized_linear_round_trips(tokens):
    from tests.relaxscript.test_pipeline_roundtrip import assert_every_stage_round_trips
    assert_every_stage_round_trips(rounded(linear_module("q4_1", 64, 72, bias=True, activation=True, tokens=tokens)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("int8_dot", ["1", "0"])
def test_non_finite_activation_makes_every_output_nan(monkeypatch, bad, int8_dot):
    """A NaN or an infinity in the input of a rounded product is not silently dropped: its block
    has codes 0 and a NaN or infinite scale, so every output is NaN, in the reference, the
    one-token kernel (integer dot products and the float kernel) and the prefill GEMM. Casting
    the NaN code to an integer had given a finite garbage code: finite logits from a NaN."""
    monkeypatch.setenv("RELAXSCRIPT_INT8_DOT", int8_dot)
    rng = np.random.default_rng(9)
    fmt, rows, cols = "q4_1", 96, 40
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = rng.standard_normal((3, rows)).astype(np.float32)
    x[:, 37] = bad
    rounded_x = fake_quantize_numpy(x)
    assert np.isnan(rounded_x[:, 32:64]).all() and np.isfinite(np.delete(rounded_x, np.s_[32:64], 1)).all()
    assert np.isnan(expected_product(x, tensors, fmt)).all()
    one = rx.VirtualMachine(rx.build(rounded(linear_module(fmt, rows, cols, tokens="1")), target="c"))["main"]
    assert np.isnan(one(x[:1], *tensors)).all()
    several = rx.VirtualMachine(rx.build(rounded(linear_module(fmt, rows, cols, tokens='"n"')), target="c"))["main"]
    assert np.isnan(several(x, *tensors)).all()
