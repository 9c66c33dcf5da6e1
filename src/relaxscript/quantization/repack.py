"""GGUF quantized blocks -> the tensors ``R.dequantize`` takes (see formats.py).

GGUF block layouts (little-endian, one block per 32 values of a row):
Q4_1 is float16 ``d``, float16 ``m``, 16 bytes of nibbles (value ``d*q + m``;
byte ``i``: low nibble value ``i``, high nibble value ``i + 16``); Q8_0 is
float16 ``d`` and 32 int8 codes (value ``d*q``).
"""
from __future__ import annotations

import numpy as np

from .formats import get_format

# GGUF type name -> (our format, bytes per block of 32 values)
_GGUF_BLOCKS = {"Q4_1": ("q4_1", 20), "Q8_0": ("q8_0", 34)}


def repack_blocks(qtype: str, raw, shape) -> tuple[np.ndarray, ...]:
    """The op's tensors ``(data, scale[, min])`` for a ``(rows, cols)`` matrix stored as GGUF
    blocks of type ``qtype`` in the bytes ``raw`` (row-major)."""
    if qtype not in _GGUF_BLOCKS:
        raise ValueError(f"repack: quantization type {qtype!r} is not supported "
                         f"(supported: {', '.join(_GGUF_BLOCKS)})")
    name, block_bytes = _GGUF_BLOCKS[qtype]
    fmt = get_format(name)
    shape = tuple(int(d) for d in shape)
    if len(shape) != 2 or shape[1] % fmt.block or min(shape) < 1:
        raise ValueError(f"repack: a {qtype} tensor must be a (rows, cols) matrix with cols a "
                         f"multiple of {fmt.block}, got shape {shape}")
    rows, nblocks = shape[0], shape[1] // fmt.block
    raw = np.ascontiguousarray(np.asarray(raw)).view(np.uint8).reshape(-1)
    if raw.size != rows * nblocks * block_bytes:
        raise ValueError(f"repack: a {qtype} tensor of shape {shape} takes {rows * nblocks * block_bytes} "
                         f"bytes, got {raw.size}")
    blocks = raw.reshape(rows, nblocks, block_bytes)
    scale = blocks[:, :, 0:2].copy().view("<f2").reshape(rows, nblocks).astype(np.float32)
    if name == "q4_1":
        minimum = blocks[:, :, 2:4].copy().view("<f2").reshape(rows, nblocks).astype(np.float32)
        data = np.ascontiguousarray(blocks[:, :, 4:]).reshape(rows, nblocks * 16)
        return data, scale, minimum
    data = np.ascontiguousarray(blocks[:, :, 2:]).view(np.int8).reshape(rows, nblocks * 32)
    return data, scale


def repack(gguf_tensor) -> tuple[np.ndarray, ...]:
    """``repack_blocks`` of a tensor read from a GGUF file (an object with ``qtype``,
    ``shape`` in row-major order and ``raw`` bytes, as ``relaxscript.frontend.gguf`` gives)."""
    return repack_blocks(gguf_tensor.qtype, gguf_tensor.raw, gguf_tensor.shape)
