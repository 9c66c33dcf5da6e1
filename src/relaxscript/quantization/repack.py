"""GGUF quantized blocks -> the tensors ``R.dequantize`` takes (layout: formats.py).

GGUF block layouts (little-endian, one block per 32 consecutive values of a
row of the ``(out, in)`` weight): Q4_1 is float16 ``d``, float16 ``m``, 16 bytes
of nibbles (value ``d*q + m``; byte ``i``: low nibble value ``i``, high nibble
value ``i + 16``); Q4_0 is float16 ``d`` and the same nibbles (value
``d*(q - 8)``); Q8_0 is float16 ``d`` and 32 int8 codes (value ``d*q``).
Repacking transposes the block grid (our matrix is ``(in, out)``) and copies the
codes unchanged; the scales are widened to float32 unless ``scale_dtype="float16"``
(the file's own 2 bytes, exactly the same values: fewer bytes to stream, what
``Engine.from_gguf`` uses by default; docs/ARCHITECTURE.md, "h1-f16scales").
"""
from __future__ import annotations

import numpy as np

from .formats import SCALE_DTYPES, get_format

# GGUF type name -> (our format, bytes per block of 32 values)
_GGUF_BLOCKS = {"Q4_0": ("q4_0", 18), "Q4_1": ("q4_1", 20), "Q8_0": ("q8_0", 34)}


def repack_blocks(qtype: str, raw, shape, scale_dtype: str = "float32") -> tuple[np.ndarray, ...]:
    """The op's tensors ``(data, scale[, min])`` for the ``(out, in)`` matrix ``shape``
    stored as GGUF blocks of type ``qtype`` in the bytes ``raw`` (row-major). The
    op then yields the transposed, ``(in, out)``, float32 matrix."""
    if qtype not in _GGUF_BLOCKS:
        raise ValueError(f"repack: quantization type {qtype!r} is not supported "
                         f"(supported: {', '.join(_GGUF_BLOCKS)}; quantization.gguf_convert.convert_weight "
                         f"converts every other type)")
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"repack: scales are float16 or float32, not {scale_dtype!r}")
    name, block_bytes = _GGUF_BLOCKS[qtype]
    fmt = get_format(name)
    shape = tuple(int(d) for d in shape)
    if len(shape) != 2 or min(shape) < 1 or shape[1] % fmt.block:
        raise ValueError(f"repack: a {qtype} tensor must be an (out, in) matrix with in a "
                         f"multiple of {fmt.block}, got shape {shape}")
    rows, nblocks = shape[0], shape[1] // fmt.block
    raw = np.ascontiguousarray(np.asarray(raw)).view(np.uint8).reshape(-1)
    if raw.size != rows * nblocks * block_bytes:
        raise ValueError(f"repack: a {qtype} tensor of shape {shape} takes {rows * nblocks * block_bytes} "
                         f"bytes, got {raw.size}")
    blocks = raw.reshape(rows, nblocks, block_bytes).transpose(1, 0, 2)   # (block, out, bytes)

    def half_floats(offset: int) -> np.ndarray:
        return np.ascontiguousarray(blocks[:, :, offset:offset + 2]).view("<f2")[:, :, 0].astype(scale_dtype)

    scale = half_floats(0)
    if name in ("q4_0", "q4_1"):
        start = 4 if name == "q4_1" else 2
        codes = np.ascontiguousarray(blocks[:, :, start:].transpose(0, 2, 1)).reshape(nblocks * 16, rows)
        return (codes, scale, half_floats(2)) if name == "q4_1" else (codes, scale)
    codes = blocks[:, :, 2:].transpose(0, 2, 1)                              # (block, 32, out)
    return np.ascontiguousarray(codes).view(np.int8).reshape(nblocks * 32, rows), scale


def repack(gguf_tensor, scale_dtype: str = "float32") -> tuple[np.ndarray, ...]:
    """``repack_blocks`` of a tensor read from a GGUF file (an object with ``qtype``,
    ``shape`` in row-major ``(out, in)`` order and ``raw`` bytes, as
    ``relaxscript.frontend.gguf`` gives)."""
    return repack_blocks(gguf_tensor.qtype, gguf_tensor.raw, gguf_tensor.shape, scale_dtype)
