"""The quantization formats: our NumPy dequantization equals gguf's own on blocks
repacked from GGUF bytes, quantize/dequantize round trips, and bad arrays or
bytes get clear errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.quantization import dequantize_numpy, quantize_numpy, repack_blocks

FORMAT_OF = {"Q4_0": "q4_0", "Q4_1": "q4_1", "Q8_0": "q8_0"}


@settings(max_examples=10, deadline=None)
@given(qtype=st.sampled_from(["Q4_0", "Q4_1", "Q8_0"]), out=st.integers(1, 9), blocks=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_repacked_gguf_blocks_dequantize_like_gguf(qtype, out, blocks, seed):
    """GGUF stores (out, in); the op yields (in, out): the transpose of gguf's dequantization."""
    gguf = pytest.importorskip("gguf", reason="the third-party gguf package is the oracle for GGUF's blocks")
    weight = np.random.default_rng(seed).standard_normal((out, 32 * blocks)).astype(np.float32)
    kind = getattr(gguf.GGMLQuantizationType, qtype)
    raw = gguf.quants.quantize(weight, kind)
    expected = gguf.quants.dequantize(raw, kind)
    scale_dtype = ["float32", "float16"][seed % 2]
    tensors = repack_blocks(qtype, raw, weight.shape, scale_dtype)
    assert all(t.dtype == scale_dtype for t in tensors[1:])
    got = dequantize_numpy(*tensors, format=FORMAT_OF[qtype])
    assert got.shape == (32 * blocks, out)
    np.testing.assert_allclose(got, expected.T, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fmt, step", [("q4_1", 1 / 15), ("q8_0", 1 / 127), ("q4_0", 1 / 8)])
def test_quantize_round_trip_error_is_within_half_a_step(fmt, step):
    """float32 scales: the error is the rounding of the codes alone."""
    matrix = np.random.default_rng(1).uniform(-1, 1, (96, 7)).astype(np.float32)
    tensors = quantize_numpy(matrix, fmt)
    back = dequantize_numpy(*tensors, format=fmt)
    blocks = matrix.reshape(3, 32, 7)
    spread = (blocks.max(1) - blocks.min(1)) if fmt == "q4_1" else np.abs(blocks).max(1)
    if fmt == "q4_0":   # the largest magnitude maps to -8 or, rounded, clips at +7
        spread = spread * 2
    bound = np.repeat(spread * step / 2, 32, axis=0) + 1e-6
    assert np.all(np.abs(back - matrix) <= bound)


def test_nibble_order_low_half_then_high_half():
    data = np.array([[0x21], [0x43]] + [[0]] * 14, dtype=np.uint8)   # rows 0, 1 and 16, 17
    scale, minimum = np.ones((1, 1), np.float32), np.zeros((1, 1), np.float32)
    column = dequantize_numpy(data, scale, minimum, format="q4_1")[:, 0]
    assert column[[0, 1, 16, 17]].tolist() == [1, 3, 2, 4]


@pytest.mark.parametrize("args, message", [
    ((np.zeros((15, 2), np.uint8), np.ones((1, 2), np.float32), np.ones((1, 2), np.float32)), "whole blocks"),
    ((np.zeros((16, 2), np.int8), np.ones((1, 2), np.float32), np.ones((1, 2), np.float32)), "uint8"),
    ((np.zeros((16, 2), np.uint8), np.ones((2, 2), np.float32), np.ones((1, 2), np.float32)), "scale must have shape"),
    ((np.zeros((16, 2), np.uint8), np.ones((1, 2), np.float32)), "needs min"),
    ((np.zeros((16, 2), np.uint8), np.ones((1, 2), np.float64), np.ones((1, 2), np.float64)), "float16 or float32"),
    ((np.zeros((16, 2), np.uint8), np.ones((1, 2), np.float16), np.ones((1, 2), np.float32)), "one dtype"),
])
def test_bad_arrays_name_the_problem(args, message):
    with pytest.raises(ValueError, match=message):
        dequantize_numpy(*args, format="q4_1")


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown quantization format 'q5_0'"):
        dequantize_numpy(np.zeros((32, 1), np.int8), np.ones((1, 1), np.float32), format="q5_0")


@pytest.mark.parametrize("qtype, raw_size, shape, message", [
    ("Q4_1", 39, (2, 32), "takes 40 bytes, got 39"),
    ("Q8_0", 34, (1, 33), "multiple of 32"),
    ("Q4_K", 10, (1, 256), "'Q4_K' is not supported"),
])
def test_repack_refuses_bad_blocks(qtype, raw_size, shape, message):
    with pytest.raises(ValueError, match=message):
        repack_blocks(qtype, np.zeros(raw_size, np.uint8), shape)


def test_tensor_specs_declare_the_op_arguments():
    from relaxscript.quantization import get_format
    assert get_format("q4_1").tensor_specs(576, 192) == [
        ("data", (288, 192), "uint8"), ("scale", (18, 192), "float32"), ("min", (18, 192), "float32")]
    assert get_format("q8_0").tensor_specs(64, 5, "float16") == [("data", (64, 5), "int8"),
                                                                  ("scale", (2, 5), "float16")]
    assert get_format("q4_1").bytes_per_block("float16") == 20 and get_format("q8_0").bytes_per_block() == 36
    with pytest.raises(ValueError, match="not whole blocks of 32"):
        get_format("q4_0").tensor_specs(48, 5)
