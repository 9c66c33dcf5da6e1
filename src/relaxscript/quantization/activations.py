"""Block-quantized activations: the meaning of ``R.fake_quantize(x, format="q8_0")``.

llama.cpp multiplies its 4- and 8-bit weights by activations rounded to 8-bit
codes (blocks of 32 values, one scale each) with integer dot instructions. Here
that rounding is an op of its own with an exact float32 definition, so a graph
says where it happens and every backend gives the same codes:

- blocks of 32 consecutive values along the last axis;
- ``amax = max |x|`` over the block, ``inv = 127 / amax`` (float32; 0 when amax is 0),
  ``code = round-half-even(x * inv)`` (float32 multiply, so C's ``nearbyintf`` and
  NumPy's ``rint`` agree), in -127..127;
- the block's scale is ``amax * (1 / 127)`` with ``1 / 127`` rounded to float32 first (a
  multiply, not a division: the loop-level simplifier turns a division by a constant into
  that multiply, so this is the form every backend computes exactly); the value is
  ``code * scale`` (float32).

A kernel that sees ``matmul(fake_quantize(x), dequantize(...))`` may compute the
codes and scales itself and use integer dot products; the result is the same sum
up to float rounding.
"""
from __future__ import annotations

import numpy as np

ACTIVATION_FORMATS = {"q8_0": 32}     # format -> values per block
CODE_LIMIT = 127
SCALE_PER_AMAX = float(np.float32(1) / np.float32(CODE_LIMIT))   # 1/127 as float32


def activation_block(format: str) -> int:  # noqa: A002 - the op's attribute name
    if format not in ACTIVATION_FORMATS:
        raise ValueError(f"unknown activation quantization format {format!r}; known: "
                         f"{', '.join(ACTIVATION_FORMATS)}")
    return ACTIVATION_FORMATS[format]


def quantize_activations_numpy(x, format: str = "q8_0") -> tuple[np.ndarray, np.ndarray]:
    """``(codes, scales)`` of ``x``: int8 codes shaped like ``x`` and float32 scales
    ``amax * (1/127)`` shaped ``x.shape[:-1] + (blocks,)``."""
    block = activation_block(format)
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise ValueError(f"fake_quantize {format}: x must be float32, got {x.dtype}")
    if x.ndim == 0 or x.shape[-1] % block:
        raise ValueError(f"fake_quantize {format}: the last axis of x {x.shape} is not whole blocks "
                         f"of {block} values")
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(CODE_LIMIT) / amax, np.float32(0)).astype(np.float32)
    scaled = blocks * inv
    # a block holding NaN or inf: amax (so the scale) is NaN or inf and the non-finite values' codes
    # are 0, so the block's values are NaN (an int8 cast of NaN is undefined)
    codes = np.rint(np.where(np.isfinite(scaled), scaled, np.float32(0))).astype(np.int8)
    scales = (amax * np.float32(SCALE_PER_AMAX)).astype(np.float32)[..., 0]
    return codes.reshape(x.shape), scales


def fake_quantize_numpy(x, format: str = "q8_0") -> np.ndarray:
    """The float32 values ``x``'s 8-bit codes stand for (the op's NumPy reference)."""
    block = activation_block(format)
    codes, scales = quantize_activations_numpy(x, format)
    values = codes.reshape(*codes.shape[:-1], -1, block).astype(np.float32) * scales[..., None]
    return values.reshape(codes.shape).astype(np.float32)
