"""The quantization formats ``R.dequantize`` knows, in the layout the op takes.

Every format quantizes each row of a 2-D ``(rows, cols)`` matrix in blocks of
``block`` consecutive columns (``cols`` a multiple of ``block``), as GGUF does:

- ``q4_1``: ``data`` uint8 ``(rows, cols // 2)``; block ``b`` of a row owns bytes
  ``16*b .. 16*b+15``; byte ``i`` holds column ``32*b + i`` in its low nibble and
  column ``32*b + 16 + i`` in its high nibble (GGUF's order, so repacking
  copies the bytes unchanged). ``scale`` and ``min`` are float32
  ``(rows, cols // 32)``; value = ``scale * code + min``.
- ``q8_0``: ``data`` int8 ``(rows, cols)``, ``scale`` float32 ``(rows, cols // 32)``;
  value = ``scale * code``.

Scales are float32 rather than GGUF's float16: the kernels then need no
half-precision conversion, for 4 more bytes per 32 weights.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QuantFormat:
    name: str
    block: int               # columns per block (one scale, one min)
    data_dtype: str          # dtype of the packed codes
    codes_per_byte: int      # 2 for 4-bit codes, 1 for 8-bit
    has_min: bool            # value = scale * code + min (else scale * code)

    @property
    def num_tensors(self) -> int:
        return 3 if self.has_min else 2

    def data_cols(self, cols):
        """Columns of the ``data`` tensor for a matrix of ``cols`` columns."""
        return cols // self.codes_per_byte

    def bytes_per_block(self) -> int:
        """Bytes one block occupies in this layout (codes + float32 scale [+ min])."""
        return self.block // self.codes_per_byte + 4 * (2 if self.has_min else 1)


FORMATS: dict[str, QuantFormat] = {
    "q4_1": QuantFormat("q4_1", 32, "uint8", 2, True),
    "q8_0": QuantFormat("q8_0", 32, "int8", 1, False),
}


def get_format(name) -> QuantFormat:
    if not isinstance(name, str) or name not in FORMATS:
        raise ValueError(f"unknown quantization format {name!r}; known formats: {', '.join(FORMATS)}")
    return FORMATS[name]


def _check_arrays(fmt: QuantFormat, data, scale, minimum) -> None:
    if data.ndim != 2 or scale.ndim != 2:
        raise ValueError(f"dequantize {fmt.name}: data and scale must be 2-D, got shapes "
                         f"{data.shape} and {scale.shape}")
    if data.dtype != np.dtype(fmt.data_dtype):
        raise ValueError(f"dequantize {fmt.name}: data must be {fmt.data_dtype}, got {data.dtype}")
    rows, cols = data.shape[0], data.shape[1] * fmt.codes_per_byte
    if cols % fmt.block:
        raise ValueError(f"dequantize {fmt.name}: {cols} columns are not whole blocks of {fmt.block}")
    expected = (rows, cols // fmt.block)
    for what, array in (("scale", scale), ("min", minimum)):
        if array is not None and array.shape != expected:
            raise ValueError(f"dequantize {fmt.name}: {what} must have shape {expected} for data of "
                             f"shape {data.shape}, got {array.shape}")
    if fmt.has_min != (minimum is not None):
        raise ValueError(f"dequantize {fmt.name}: {'needs' if fmt.has_min else 'takes no'} min tensor")


def codes_numpy(fmt: QuantFormat, data: np.ndarray) -> np.ndarray:
    """The integer codes as a ``(rows, cols)`` int32 array."""
    rows = data.shape[0]
    if fmt.codes_per_byte == 1:
        return data.astype(np.int32)
    blocks = data.reshape(rows, -1, fmt.block // 2)
    return np.concatenate([blocks & 15, blocks >> 4], axis=-1).reshape(rows, -1).astype(np.int32)


def dequantize_numpy(data, scale, minimum=None, *, format: str) -> np.ndarray:
    """The float32 matrix a quantized tensor stands for (the op's NumPy reference)."""
    fmt = get_format(format)
    data, scale = np.asarray(data), np.asarray(scale, dtype=np.float32)
    minimum = None if minimum is None else np.asarray(minimum, dtype=np.float32)
    _check_arrays(fmt, data, scale, minimum)
    rows = data.shape[0]
    codes = codes_numpy(fmt, data).astype(np.float32).reshape(rows, -1, fmt.block)
    values = codes * scale[:, :, None]
    if minimum is not None:
        values = values + minimum[:, :, None]
    return values.reshape(rows, -1).astype(np.float32)


def quantize_numpy(weight: np.ndarray, format: str) -> tuple[np.ndarray, ...]:
    """Round a float ``(rows, cols)`` matrix to ``format`` (for tests and benchmarks; models
    come quantized from their files). Returns the op's tensors ``(data, scale[, min])``."""
    fmt = get_format(format)
    weight = np.asarray(weight, dtype=np.float32)
    if weight.ndim != 2 or weight.shape[1] % fmt.block:
        raise ValueError(f"quantize {fmt.name}: expected a (rows, cols) matrix with cols a multiple "
                         f"of {fmt.block}, got shape {weight.shape}")
    rows = weight.shape[0]
    blocks = weight.reshape(rows, -1, fmt.block)
    if fmt.has_min:
        low, high = blocks.min(axis=-1), blocks.max(axis=-1)
        scale = ((high - low) / 15).astype(np.float32)
        safe = np.where(scale == 0, 1, scale)
        codes = np.clip(np.rint((blocks - low[..., None]) / safe[..., None]), 0, 15).astype(np.uint8)
        half = fmt.block // 2
        packed = (codes[..., :half] | (codes[..., half:] << 4)).astype(np.uint8)
        return packed.reshape(rows, -1), scale, low.astype(np.float32)
    scale = (np.abs(blocks).max(axis=-1) / 127).astype(np.float32)
    safe = np.where(scale == 0, 1, scale)
    codes = np.clip(np.rint(blocks / safe[..., None]), -127, 127).astype(np.int8)
    return codes.reshape(rows, -1), scale
