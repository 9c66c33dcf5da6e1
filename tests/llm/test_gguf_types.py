"""Every ggml type the gguf package dequantizes loads: our decoders equal gguf's bit for bit,
the engine's conversions (copied, exact, Q4_K -> q4_1, requantized q8_0) stay within their
documented error, and a model whose layers use K-quants follows the NumPy reference."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaxscript.frontend.ggml_types import GGML_TYPES, NATIVE_DEQUANTIZE, dequantizable, dequantize_blocks
from relaxscript.frontend.gguf import GGUFFormatError, UnsupportedModelError, llama_config, read_gguf
from relaxscript.llm.engine import Engine
from relaxscript.llm.generation import generate
from relaxscript.llm.reference import NumpyLlama
from relaxscript.quantization.formats import dequantize_numpy
from relaxscript.quantization.gguf_convert import convert_weight
from tests.llm.gguf_files import gguf, random_blocks, write_random_llama_gguf

QUANTIZED = [name for name, block, _ in GGML_TYPES.values() if block > 1 and dequantizable(name)]
# what the gguf package decodes (0.19: all but Q8_1, Q8_K, Q1_0 and the integer types)
GGUF_DECODES = [name for name in QUANTIZED if name not in NATIVE_DEQUANTIZE]
METHOD = {"Q4_0": ("q4_0", "copied"), "Q4_1": ("q4_1", "copied"), "Q8_0": ("q8_0", "copied"),
          "Q5_0": ("q8_0", "exact"), "Q4_K": ("q4_1", "repacked")}


def _oracle(raw, qtype):
    with np.errstate(all="ignore"):
        return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[qtype])


def test_every_type_gguf_decodes_is_accepted():
    for name, block, nbytes in GGML_TYPES.values():
        gtype = getattr(gguf.GGMLQuantizationType, name, None)
        if gtype is None or block == 1 and name not in ("F32", "F16", "BF16"):
            continue
        assert gguf.GGML_QUANT_SIZES[gtype] == (block, nbytes), name
        try:
            _oracle(np.zeros((1, nbytes), np.uint8), name)
        except NotImplementedError:
            assert not dequantizable(name) or name in NATIVE_DEQUANTIZE, name
        else:
            assert dequantizable(name), name
    assert {"Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "BF16"} <= set(NATIVE_DEQUANTIZE)


@settings(max_examples=40, deadline=None)
@given(qtype=st.sampled_from(QUANTIZED), rows=st.integers(1, 5), blocks=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1), any_bytes=st.booleans())
def test_decoders_equal_gguf_bit_for_bit(qtype, rows, blocks, seed, any_bytes):
    rng = np.random.default_rng(seed)
    block, nbytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]]
    if any_bytes:   # any bytes, inf/nan scales included: decoded the same, without a warning
        raw = rng.integers(0, 256, (rows, blocks * nbytes), dtype=np.uint8)
    else:
        raw = random_blocks(qtype, rows, blocks * block, rng)
    with np.errstate(all="ignore"):
        want = _oracle(raw, qtype)
    got = dequantize_blocks(raw, qtype, (rows, blocks * block))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 40))
def test_bf16_widens_exactly(seed, size):
    values = np.random.default_rng(seed).standard_normal(size).astype(np.float32) * 1e3
    raw = gguf.quants.quantize(values, gguf.GGMLQuantizationType.BF16).view(np.uint8)
    got = dequantize_blocks(raw, "BF16", (size,))
    np.testing.assert_array_equal(got, _oracle(raw, "BF16"))
    np.testing.assert_allclose(got, values, rtol=2 ** -8)


def _block_max(values, qtype_block=32):
    """max |w| of each 32-value block along the rows, (out, in // 32)."""
    out, cols = values.shape
    return np.abs(values).reshape(out, cols // qtype_block, qtype_block).max(axis=2)


@settings(max_examples=40, deadline=None)
@given(qtype=st.sampled_from([q for q in QUANTIZED]), scale_dtype=st.sampled_from(["float16", "float32"]),
       rows=st.integers(1, 6), blocks=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_conversion_is_within_its_documented_error(qtype, scale_dtype, rows, blocks, seed):
    rng = np.random.default_rng(seed)
    block = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[qtype]][0]
    shape = (rows, blocks * block)
    raw = random_blocks(qtype, *shape, rng)
    want = _oracle(raw, qtype)
    conv = convert_weight(qtype, raw, shape, scale_dtype)
    if not np.isfinite(want).all():      # random bytes of a type whose fields we do not set
        assert conv.format is None and conv.method == "float32"
        return
    fmt, method = METHOD.get(qtype, ("q8_0", "requantized"))
    if method == "requantized" and scale_dtype == "float16" and np.abs(want).max() / 127 > 65504:
        assert conv.format is None and conv.method == "float32"   # no float16 scale holds it (MXFP4's range)
        return
    assert (conv.format, conv.method) == (fmt, method), conv.describe()
    got = dequantize_numpy(*conv.arrays, format=fmt).T
    err = np.abs(got - want)
    assert conv.max_abs_error == pytest.approx(float(err.max()), rel=1e-6, abs=0)
    if method not in ("copied", "exact"):
        assert conv.rms_error == pytest.approx(float(np.sqrt(np.mean(err.astype(np.float64) ** 2))), rel=1e-5)
        assert conv.rms == pytest.approx(float(np.sqrt(np.mean(want.astype(np.float64) ** 2))), rel=1e-5)
    assert conv.max_abs == (0.0 if method == "copied" else pytest.approx(float(np.abs(want).max())))
    if method in ("copied", "exact") or (method == "repacked" and scale_dtype == "float32"):
        np.testing.assert_array_equal(got, want)
    elif method == "repacked":
        # each sub-block's scale d*sc and min dmin*m rounded to float16: half an ulp each (2^-11
        # relative, 2^-25 absolute in the subnormals), the scale's error times a code of at most 15
        blocks_ = raw.reshape(rows, -1, 144)
        d = blocks_[:, :, 0:2].copy().view("<f2").astype(np.float64)
        dmin = blocks_[:, :, 2:4].copy().view("<f2").astype(np.float64)
        bound = (np.abs(d) * 63 * 15 + np.abs(dmin) * 63) * 2.0 ** -11 + 16 * 2.0 ** -25
        assert (err.reshape(rows, -1, 256).max(axis=2) <= bound[:, :, 0] * (1 + 1e-6)).all()
    else:
        # half a step of a scale max|w|/127 of the block (the scale rounded first, so at most
        # 2^-11 more in float16, and below 2^-14 a float16 subnormal is 2^-24 apart: up to 127
        # codes times half that)
        # (+ the float32 product scale * code, 127 steps, rounded: 2^-24 of it is ~2^-16 of a step)
        slack = (2.0 ** -10 if scale_dtype == "float16" else 0) + 2.0 ** -14
        floor = 127 * 2.0 ** -25 if scale_dtype == "float16" else 1e-30
        bound = _block_max(want) / 254 * (1 + slack) + floor
        assert (err.reshape(rows, -1, 32).max(axis=2) <= bound).all()


def test_scales_that_do_not_fit_fall_back():
    rng = np.random.default_rng(0)
    raw = random_blocks("Q4_K", 2, 256, rng)
    raw[:, 0:2] = np.array([60000.0], "<f2").view(np.uint8)   # d*sc overflows float16
    want = _oracle(raw, "Q4_K")
    assert np.isfinite(want).all()
    assert convert_weight("Q4_K", raw, (2, 256), "float32").method == "repacked"   # float32 holds it
    wide = convert_weight("Q4_K", raw, (2, 256), "float16")
    assert (wide.format, wide.method) == (None, "float32")    # even max|w|/127 overflows float16
    raw = random_blocks("Q6_K", 2, 256, rng)
    raw[1, 208:210] = np.array([np.nan], "<f2").view(np.uint8)   # a corrupt scale: float32, as the file
    assert convert_weight("Q6_K", raw, (2, 256)).method == "float32"


def _write_unsupported(path, qtype):
    writer = gguf.GGUFWriter(path, "llama")
    gtype = gguf.GGMLQuantizationType[qtype]
    block, nbytes = gguf.GGML_QUANT_SIZES[gtype]
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((2, nbytes), np.uint8), raw_dtype=gtype)
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()


@pytest.mark.parametrize("qtype", ["Q8_K", "Q8_1"])
def test_types_nothing_dequantizes_are_named(tmp_path, qtype):
    path = tmp_path / f"{qtype}.gguf"
    _write_unsupported(path, qtype)
    with pytest.raises(UnsupportedModelError, match=f"'blk.0.ffn_up.weight' has type {qtype}, which cannot "
                                                    f"be dequantized.*supported types are F32, F16, Q4_0"):
        read_gguf(path)


# a Q4_K_M-like mix: Q4_K projections, Q6_K for some, an untied Q6_K output, every other common type
MIXED_TYPES = {"token_embd.weight": "Q4_K", "output.weight": "Q6_K",
               "blk.0.attn_q.weight": "Q4_K", "blk.0.attn_k.weight": "Q4_K", "blk.0.attn_v.weight": "Q6_K",
               "blk.0.attn_output.weight": "Q5_K", "blk.0.ffn_gate.weight": "Q3_K",
               "blk.0.ffn_up.weight": "Q2_K", "blk.0.ffn_down.weight": "Q6_K",
               "blk.1.attn_q.weight": "Q5_0", "blk.1.attn_k.weight": "Q5_1", "blk.1.attn_v.weight": "IQ4_NL",
               "blk.1.attn_output.weight": "BF16", "blk.1.attn_norm.weight": "BF16",
               "blk.1.ffn_gate.weight": "Q4_K", "blk.1.ffn_up.weight": "Q4_K", "blk.1.ffn_down.weight": "Q4_K"}
PROMPTS = ([5, 17, 33, 60, 2, 9, 11], [1, 2, 3], [40])


@pytest.fixture(scope="module")
def mixed_gguf(tmp_path_factory):
    return write_random_llama_gguf(tmp_path_factory.mktemp("kquants") / "mixed.gguf", hidden=256, ffn=512,
                                   heads=4, kv_heads=2, qtypes="F32", tie_embeddings=False,
                                   tensor_qtypes=MIXED_TYPES, seed=3)


def test_mixed_file_reads_with_every_type(mixed_gguf):
    gguf_file = read_gguf(mixed_gguf)
    assert {name: gguf_file.tensor(name).qtype for name in MIXED_TYPES} == MIXED_TYPES
    assert not llama_config(gguf_file).tie_word_embeddings


def test_f32_engine_equals_the_reference_on_a_k_quant_file(mixed_gguf):
    engine = Engine.from_gguf(mixed_gguf, weights="f32", max_context=40)
    reference = NumpyLlama(mixed_gguf, max_context=40)
    for prompt in PROMPTS:
        assert engine.generate(prompt, max_new_tokens=10) == generate(reference, prompt, 10)
    engine.reset(); reference.reset()
    np.testing.assert_allclose(engine.prefill(PROMPTS[0]), reference.prefill(PROMPTS[0]), rtol=1e-3, atol=1e-3)
    assert engine.weight_conversions == {}
    assert "float32" in engine.conversion_report()[0]


@pytest.mark.parametrize("scales", ["f16", "f32"])
def test_q4_engine_computes_the_converted_weights(mixed_gguf, scales):
    """The q4 engine equals the reference run on the converted weights (exact activations and
    cache): the repacked and requantized layouts reach the kernels intact, the report says what
    happened to each type."""
    engine = Engine.from_gguf(mixed_gguf, weights="q4", activations="f32", kv_cache="f32", scales=scales,
                              max_context=40)
    conversions = engine.weight_conversions
    assert {name: (c.qtype, c.format, c.method) for name, c in conversions.items() if c.qtype == "Q4_K"} == \
        {name: ("Q4_K", "q4_1", "repacked") for name, t in MIXED_TYPES.items() if t == "Q4_K"}
    assert conversions["blk.1.attn_q.weight"].method == "exact"
    assert conversions["blk.0.ffn_down.weight"].format == "q8_0"
    assert "blk.1.attn_output.weight" not in conversions        # BF16: float32 weights
    report = "\n".join(engine.conversion_report())
    for line in ("x Q6_K -> q8_0 (requantized; max abs error", "x Q4_K -> q4_1 (repacked",
                 "1 x Q5_0 -> q8_0 (exact)", "1 x IQ4_NL -> q8_0 (requantized"):
        assert line in report
    gguf_file = read_gguf(mixed_gguf)
    weights = {name: t.dequantize() for name, t in gguf_file.tensors.items()}
    scale_dtype = {"f16": "float16", "f32": "float32"}[scales]
    for name, conv in conversions.items():
        tensor = gguf_file.tensor(name)
        again = convert_weight(tensor.qtype, tensor.raw, tensor.shape, scale_dtype)
        weights[name] = dequantize_numpy(*again.arrays, format=again.format).T
        assert np.abs(weights[name] - tensor.dequantize()).max() == pytest.approx(conv.max_abs_error)
        assert conv.max_abs_error <= 0.005 * conv.max_abs     # a garbled layout would be far off
    reference = NumpyLlama(llama_config(gguf_file), weights, max_context=40)
    for prompt in PROMPTS:
        assert engine.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)
    engine.reset(); reference.reset()
    np.testing.assert_allclose(engine.prefill(PROMPTS[0]), reference.prefill(PROMPTS[0]), rtol=1e-3, atol=2e-3)


@pytest.fixture(scope="module")
def small_k_file(tmp_path_factory):
    path = write_random_llama_gguf(tmp_path_factory.mktemp("kfuzz") / "k.gguf", layers=1, hidden=256, heads=2,
                                   kv_heads=1, ffn=256, vocab=64, qtypes=("Q4_K", "Q6_K"),
                                   tensor_qtypes={"blk.0.ffn_down.weight": "Q5_K", "blk.0.attn_v.weight": "Q3_K",
                                                  "blk.0.attn_k.weight": "Q2_K", "blk.0.attn_q.weight": "BF16"})
    return open(path, "rb").read()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1, exclude_max=True))
def test_truncated_k_quant_files_give_format_errors(small_k_file, tmp_path, cut):
    path = tmp_path / "truncated.gguf"
    path.write_bytes(small_k_file[:int(cut * len(small_k_file))])
    with pytest.raises(GGUFFormatError, match="truncated.gguf"):
        llama_config(read_gguf(path))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupt_k_quant_files_read_or_fail_clearly(small_k_file, tmp_path, data):
    corrupt = bytearray(small_k_file)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(corrupt) - 1))
        corrupt[at] = data.draw(st.integers(0, 255))
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(bytes(corrupt))
    try:
        gguf_file = read_gguf(path)
        llama_config(gguf_file)
        for tensor in gguf_file.tensors.values():
            with np.errstate(all="raise"):
                tensor.dequantize()
            if len(tensor.shape) == 2:
                convert_weight(tensor.qtype, tensor.raw, tensor.shape, "float16")
    except (GGUFFormatError, UnsupportedModelError) as err:
        assert str(path) in str(err)


def test_without_the_gguf_package(monkeypatch, tmp_path):
    """The common types decode without gguf; a rarer one is refused by name, saying why."""
    from relaxscript.frontend import ggml_types
    path = write_random_llama_gguf(tmp_path / "iq.gguf", layers=1, hidden=256, heads=2, kv_heads=1, ffn=256,
                                   vocab=64, qtypes="Q4_K", tensor_qtypes={"blk.0.ffn_up.weight": "IQ4_NL"})
    monkeypatch.setattr(ggml_types, "_gguf_quants", lambda: None)
    monkeypatch.setattr(ggml_types, "_GGUF_SUPPORT", {})
    assert all(dequantizable(name) for name in NATIVE_DEQUANTIZE) and not dequantizable("IQ4_NL")
    with pytest.raises(UnsupportedModelError, match="'blk.0.ffn_up.weight' has type IQ4_NL, which cannot be "
                                                    "dequantized \\(the rarer types are decoded by the 'gguf'"):
        read_gguf(path)
