"""The quantization formats ``R.dequantize`` knows, in the layout the op takes.

A quantized tensor stands for a float32 ``(rows, cols)`` matrix whose every
column is cut into blocks of ``block`` consecutive rows; a block shares one
scale (and, for some formats, one minimum). For a linear layer the matrix is
the right operand of ``x @ w``, i.e. ``(in_features, out_features)``: GGUF's
``(out, in)`` weight transposed, its blocks (along ``in``) running down the
columns. Codes of neighbouring columns are adjacent in memory, so the kernel's
vector lanes walk output features and each code byte is read once per token.

- ``q4_1``: ``data`` uint8 ``(rows // 2, cols)``; in block ``b`` (rows ``32*b ..
  32*b+31``), byte row ``16*b + i`` holds row ``32*b + i`` in its low nibble and
  row ``32*b + 16 + i`` in its high nibble (GGUF's nibble order). ``scale`` and
  ``min`` are float32 ``(rows // 32, cols)``; value = ``scale * code + min``.
- ``q4_0``: as ``q4_1`` without ``min``; value = ``scale * (code - 8)``.
- ``q8_0``: ``data`` int8 ``(rows, cols)``, ``scale`` float32 ``(rows // 32, cols)``;
  value = ``scale * code``.

Scales (and minimums) are float32 (``repack``'s default: a q4_1 block is 24
bytes, a q8_0 block 36) or float16 as GGUF stores them (20 and 34 bytes; the
generated C kernels read both, the LLM engine uses float16); the value is
computed in float32 either way.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QuantFormat:
    name: str
    block: int               # rows per block (one scale, one min)
    data_dtype: str          # dtype of the packed codes
    codes_per_byte: int      # 2 for 4-bit codes, 1 for 8-bit
    has_min: bool            # value = scale * code + min (else scale * code)
    code_offset: int = 0     # added to each code before scaling (q4_0: -8)

    @property
    def num_tensors(self) -> int:
        return 3 if self.has_min else 2

    def tensor_specs(self, rows: int, cols: int, scale_dtype: str = "float32"
                     ) -> list[tuple[str, tuple[int, int], str]]:
        """``(role, shape, dtype)`` of each tensor ``R.dequantize`` takes for a ``(rows, cols)``
        matrix, in argument order: what a model declares as its parameters."""
        if rows % self.block:
            raise ValueError(f"{self.name}: a matrix of {rows} rows is not whole blocks of {self.block}")
        if scale_dtype not in SCALE_DTYPES:
            raise ValueError(f"{self.name}: scales are float16 or float32, not {scale_dtype}")
        specs = [("data", (rows // self.codes_per_byte, cols), self.data_dtype),
                 ("scale", (rows // self.block, cols), scale_dtype)]
        if self.has_min:
            specs.append(("min", (rows // self.block, cols), scale_dtype))
        return specs

    def bytes_per_block(self, scale_dtype: str = "float32") -> int:
        """Bytes one block occupies in this layout (codes + scale [+ min])."""
        return self.block // self.codes_per_byte + (2 if scale_dtype == "float16" else 4) * (
            2 if self.has_min else 1)


SCALE_DTYPES = ("float16", "float32")

FORMATS: dict[str, QuantFormat] = {
    "q4_0": QuantFormat("q4_0", 32, "uint8", 2, False, -8),
    "q4_1": QuantFormat("q4_1", 32, "uint8", 2, True),
    "q8_0": QuantFormat("q8_0", 32, "int8", 1, False),
}


def get_format(name) -> QuantFormat:
    if not isinstance(name, str) or name not in FORMATS:
        raise ValueError(f"unknown quantization format {name!r}; known formats: {', '.join(FORMATS)}")
    return FORMATS[name]


def check_arrays(fmt: QuantFormat, data, scale, minimum) -> None:
    """A clear ``ValueError`` for arrays that do not form a ``fmt`` tensor."""
    if data.ndim != 2 or scale.ndim != 2:
        raise ValueError(f"dequantize {fmt.name}: data and scale must be 2-D, got shapes "
                         f"{data.shape} and {scale.shape}")
    if data.dtype != np.dtype(fmt.data_dtype):
        raise ValueError(f"dequantize {fmt.name}: data must be {fmt.data_dtype}, got {data.dtype}")
    packed_block = fmt.block // fmt.codes_per_byte
    if data.shape[0] % packed_block:
        raise ValueError(f"dequantize {fmt.name}: data has {data.shape[0]} rows, not whole blocks of "
                         f"{packed_block} ({fmt.block} values)")
    expected = (data.shape[0] // packed_block, data.shape[1])
    for what, array in (("scale", scale), ("min", minimum)):
        if array is not None and array.shape != expected:
            raise ValueError(f"dequantize {fmt.name}: {what} must have shape (blocks, cols) = {expected} "
                             f"for data of shape {data.shape}, got {array.shape}")
        if array is not None and array.dtype.name not in SCALE_DTYPES:
            raise ValueError(f"dequantize {fmt.name}: {what} must be float16 or float32, got {array.dtype}")
    if minimum is not None and minimum.dtype != scale.dtype:
        raise ValueError(f"dequantize {fmt.name}: min ({minimum.dtype}) and scale ({scale.dtype}) "
                         "must have one dtype")
    if fmt.has_min != (minimum is not None):
        raise ValueError(f"dequantize {fmt.name}: {'needs' if fmt.has_min else 'takes no'} min tensor")


def codes_numpy(fmt: QuantFormat, data: np.ndarray) -> np.ndarray:
    """The integer codes as a ``(rows, cols)`` int32 array."""
    if fmt.codes_per_byte == 1:
        return data.astype(np.int32)
    half = fmt.block // 2
    blocks = data.reshape(-1, half, data.shape[1])
    return np.concatenate([blocks & 15, blocks >> 4], axis=1).reshape(-1, data.shape[1]).astype(np.int32)


def dequantize_numpy(data, scale, minimum=None, *, format: str) -> np.ndarray:
    """The float32 matrix a quantized tensor stands for (the op's NumPy reference)."""
    fmt = get_format(format)
    data, scale = np.asarray(data), np.asarray(scale)
    minimum = None if minimum is None else np.asarray(minimum)
    check_arrays(fmt, data, scale, minimum)
    cols = data.shape[1]
    codes = (codes_numpy(fmt, data) + fmt.code_offset).astype(np.float32).reshape(-1, fmt.block, cols)
    values = codes * scale.astype(np.float32)[:, None, :]
    if minimum is not None:
        values = values + minimum.astype(np.float32)[:, None, :]
    return values.reshape(-1, cols).astype(np.float32)


def quantize_numpy(matrix: np.ndarray, format: str, scale_dtype: str = "float32") -> tuple[np.ndarray, ...]:
    """Round a float ``(rows, cols)`` matrix to ``format`` (for tests and benchmarks; models
    come quantized from their files). Returns the op's tensors ``(data, scale[, min])``."""
    fmt = get_format(format)
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"quantize {fmt.name}: scales are float16 or float32, not {scale_dtype}")
    tensors = _quantize(fmt, matrix)
    return (tensors[0], *(t.astype(scale_dtype) for t in tensors[1:]))


def _quantize(fmt: QuantFormat, matrix) -> tuple[np.ndarray, ...]:
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] % fmt.block:
        raise ValueError(f"quantize {fmt.name}: expected a (rows, cols) matrix with rows a multiple "
                         f"of {fmt.block}, got shape {matrix.shape}")
    cols = matrix.shape[1]
    blocks = matrix.reshape(-1, fmt.block, cols)
    if fmt.has_min:
        low, high = blocks.min(axis=1), blocks.max(axis=1)
        scale = ((high - low) / 15).astype(np.float32)
        safe = np.where(scale == 0, 1, scale)
        codes = np.clip(np.rint((blocks - low[:, None]) / safe[:, None]), 0, 15).astype(np.uint8)
        half = fmt.block // 2
        packed = (codes[:, :half] | (codes[:, half:] << 4)).astype(np.uint8)
        return packed.reshape(-1, cols), scale, low.astype(np.float32)
    if fmt.codes_per_byte == 2:   # q4_0: codes 0..15 stand for -8..7
        scale = (np.abs(blocks).max(axis=1) / 8).astype(np.float32)
        safe = np.where(scale == 0, 1, scale)
        codes = (np.clip(np.rint(blocks / safe[:, None]), -8, 7) + 8).astype(np.uint8)
        half = fmt.block // 2
        return (codes[:, :half] | (codes[:, half:] << 4)).astype(np.uint8).reshape(-1, cols), scale
    scale = (np.abs(blocks).max(axis=1) / 127).astype(np.float32)
    safe = np.where(scale == 0, 1, scale)
    codes = np.clip(np.rint(blocks / safe[:, None]), -127, 127).astype(np.int8)
    return codes.reshape(-1, cols), scale
