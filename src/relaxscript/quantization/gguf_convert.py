"""Any dequantizable GGUF weight -> a format the generated kernels compute with.

The kernels know q4_0, q4_1 and q8_0 (formats.py). Per file type:

- **Q4_0, Q4_1, Q8_0: copied** (``repack_blocks``: the same codes and scales).
- **Q5_0: exact as q8_0.** Its value ``d*(q - 16)`` has ``q - 16`` in -16..15:
  that is a q8_0 code with the same scale ``d``.
- **Q4_K: repacked as q4_1.** Each 32-value sub-block has one scale and one
  min, ``d*sc*q - dmin*m``, which is a q4_1 block with scale ``d*sc`` and min
  ``-dmin*m``. Both products are exact in float32 (``scales="f32"``: the
  same values as the file); float16 scales round them (11-bit significands).
- **Every other type** (Q5_1, Q2_K, Q3_K, Q5_K, Q6_K, IQ*, TQ*, MXFP4, ...):
  **requantized to q8_0** from the file's float32 values: per block of 32,
  scale ``max|w| / 127`` (rounded to the scale dtype first, then the codes
  ``round(w / scale)``), so the error is at most half a step,
  ``max|w| / 254`` of the block (plus the scale's rounding).

A conversion whose scales do not fit the scale dtype (float16 overflows
above 65504) falls back to q8_0 requantization and then to float32, so a
file always loads; every conversion records the largest error against the
file's dequantized values (``ConvertedWeight``), and ``conversion_report``
summarizes them per type.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..frontend.ggml_types import block_layout, dequantize_blocks, k4_scales_mins
from .formats import SCALE_DTYPES, dequantize_numpy
from .repack import repack_blocks

__all__ = ["ConvertedWeight", "convert_weight", "conversion_report", "FLOAT_TYPES", "COPIED_TYPES"]

FLOAT_TYPES = ("F32", "F16", "BF16")           # computed as float32 (BF16 and F16 widen exactly)
COPIED_TYPES = {"Q4_0": "q4_0", "Q4_1": "q4_1", "Q8_0": "q8_0"}


@dataclasses.dataclass(frozen=True)
class ConvertedWeight:
    """How one ``(out, in)`` GGUF weight is computed.

    ``format``: the kernels' format (None: float32 weights); ``arrays``: the op's
    ``(data, scale[, min])`` in the ``(in, out)`` layout (empty for float32);
    ``method``: "copied", "exact", "repacked", "requantized" or "float32";
    ``max_abs_error``: the largest ``|converted - file value|`` (0 for copied/exact);
    ``max_abs``: the largest ``|file value|`` (for a relative error; 0 when not measured);
    ``rms_error`` / ``rms``: the root mean square of the error and of the file's values.
    """
    qtype: str
    format: str | None
    method: str
    arrays: tuple = ()
    max_abs_error: float = 0.0
    max_abs: float = 0.0
    rms_error: float = 0.0
    rms: float = 0.0

    def describe(self) -> str:
        target = self.format or "float32"
        if self.method in ("copied", "exact", "float32") and not self.max_abs_error:
            return f"{self.qtype} -> {target} ({self.method})"
        rel = self.max_abs_error / self.max_abs if self.max_abs else float("nan")
        rms = self.rms_error / self.rms if self.rms else float("nan")
        return (f"{self.qtype} -> {target} ({self.method}, max abs error {self.max_abs_error:.3g}, "
                f"{rel:.2%} of max |w|; rms error {rms:.2%} of rms |w|)")


def _grid(raw: np.ndarray, shape: tuple[int, int], qtype: str) -> np.ndarray:
    """The bytes as (out, blocks per row, block bytes)."""
    block, nbytes = block_layout(qtype)
    return np.ascontiguousarray(np.asarray(raw)).view(np.uint8).reshape(shape[0], shape[1] // block, nbytes)


def _q5_0_as_q8_0(raw, shape, scale_dtype):
    grid = _grid(raw, shape, "Q5_0")                                  # (out, nb, 22)
    out, nb = grid.shape[:2]
    blocks = grid.reshape(-1, 22)
    qh = np.unpackbits(blocks[:, 2:6], axis=1, bitorder="little")
    codes = np.concatenate([blocks[:, 6:22] & 15, blocks[:, 6:22] >> 4], axis=1) | (qh << 4)
    codes = (codes.astype(np.int16) - 16).astype(np.int8).reshape(out, nb, 32)
    scale = np.ascontiguousarray(blocks[:, 0:2]).view("<f2").reshape(out, nb)
    data = np.ascontiguousarray(codes.transpose(1, 2, 0)).reshape(nb * 32, out)
    return data, np.ascontiguousarray(scale.T).astype(scale_dtype)


def _q4_k_as_q4_1(raw, shape, scale_dtype):
    grid = _grid(raw, shape, "Q4_K")                                  # (out, nb, 144)
    out, nb = grid.shape[:2]
    blocks = grid.reshape(-1, 144)
    d = np.ascontiguousarray(blocks[:, 0:2]).view("<f2").astype(np.float32)
    dmin = np.ascontiguousarray(blocks[:, 2:4]).view("<f2").astype(np.float32)
    sc, m = k4_scales_mins(blocks[:, 4:16])
    with np.errstate(over="ignore", invalid="ignore"):
        scale = (d * sc.astype(np.float32)).astype(scale_dtype)      # (out*nb, 8) exact in float32
        minimum = (-(dmin * m.astype(np.float32))).astype(scale_dtype)
    # sub-block j: 32 values, low nibbles of qs[32*(j//2) ..] for even j, high for odd: as q4_1, one
    # byte holds value i (low) and i + 16 (high) of a sub-block
    qs = blocks[:, 16:144].reshape(-1, 4, 32)
    codes = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)   # (out*nb, sub-block, value)
    packed = codes[:, :, :16] | (codes[:, :, 16:] << 4)                 # (out*nb, 8, 16)
    data = np.ascontiguousarray(packed.reshape(out, nb * 8, 16).transpose(1, 2, 0)).reshape(nb * 128, out)
    return (data, np.ascontiguousarray(scale.reshape(out, nb * 8).T),
            np.ascontiguousarray(minimum.reshape(out, nb * 8).T))


def requantize_q8_0(values: np.ndarray, scale_dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """A float ``(out, in)`` matrix as q8_0 ``(data, scale)`` in the ``(in, out)`` layout, blocks of 32
    along ``in``. The scale is rounded to ``scale_dtype`` before the codes are chosen, so each code
    is within half a step of the value."""
    out, cols = values.shape
    blocks = values.reshape(out, cols // 32, 32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = (np.abs(blocks).max(axis=2) / np.float32(127)).astype(scale_dtype)
        step = scale.astype(np.float32)[:, :, None]
        codes = np.where(step > 0, blocks / np.where(step > 0, step, 1), 0)
        codes = np.clip(np.rint(np.nan_to_num(codes)), -127, 127).astype(np.int8)
    data = np.ascontiguousarray(codes.transpose(1, 2, 0)).reshape(cols, out)
    return data, np.ascontiguousarray(scale.T)


def _error(fmt: str, arrays: tuple, values: np.ndarray) -> tuple[float, float]:
    """The largest and the root mean square |dequantized arrays - values| (values: the file's
    (out, in) float32); nan when either is not finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        got = dequantize_numpy(*arrays, format=fmt)
        diff = np.abs(got - values.T)
    if not np.isfinite(diff).all():
        return float("nan"), float("nan")
    return float(diff.max(initial=0.0)), float(np.sqrt(np.mean(np.square(diff, dtype=np.float64))))


def convert_weight(qtype: str, raw, shape, scale_dtype: str = "float16") -> ConvertedWeight:
    """How the ``(out, in)`` weight of GGUF type ``qtype`` in bytes ``raw`` is computed (see the
    module docstring); the arrays' scales are ``scale_dtype``."""
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"convert_weight: scales are float16 or float32, not {scale_dtype!r}")
    shape = tuple(int(d) for d in shape)
    if qtype in FLOAT_TYPES:
        return ConvertedWeight(qtype, None, "float32")
    if len(shape) != 2:
        raise ValueError(f"convert_weight: a {qtype} weight must be an (out, in) matrix, got shape {shape}")
    block, _ = block_layout(qtype)
    if shape[1] % max(block, 32):
        # rows the kernels' 32-blocks do not tile (a type with smaller blocks): computed in float32
        return ConvertedWeight(qtype, None, "float32")
    if qtype in COPIED_TYPES:
        arrays = repack_blocks(qtype, raw, shape, scale_dtype)
        if np.isfinite(arrays[1]).all():
            return ConvertedWeight(qtype, COPIED_TYPES[qtype], "copied", arrays)
    values = dequantize_blocks(raw, qtype, shape)
    finite = bool(np.isfinite(values).all())
    max_abs = float(np.abs(values).max(initial=0.0)) if finite else float("nan")
    rms = float(np.sqrt(np.mean(np.square(values, dtype=np.float64)))) if finite else float("nan")
    if qtype == "Q5_0":
        arrays = _q5_0_as_q8_0(raw, shape, scale_dtype)
        if np.isfinite(arrays[1]).all():
            return ConvertedWeight(qtype, "q8_0", "exact", arrays, 0.0, max_abs, 0.0, rms)
    if qtype == "Q4_K":
        arrays = _q4_k_as_q4_1(raw, shape, scale_dtype)
        error, rms_error = _error("q4_1", arrays, values)
        if np.isfinite(error):
            return ConvertedWeight(qtype, "q4_1", "repacked", arrays, error, max_abs, rms_error, rms)
    if finite:   # else a corrupt scale made the file's own values inf/nan: float32 as they are
        arrays = requantize_q8_0(values, scale_dtype)
        error, rms_error = _error("q8_0", arrays, values)
        if np.isfinite(error):
            return ConvertedWeight(qtype, "q8_0", "requantized", arrays, error, max_abs, rms_error, rms)
    return ConvertedWeight(qtype, None, "float32", (), 0.0, max_abs, 0.0, rms)


def conversion_report(conversions: dict) -> list[str]:
    """One line per (file type, method, format): how many tensors, and the largest error."""
    groups: dict[tuple, list] = {}
    for conv in conversions.values():
        groups.setdefault((conv.qtype, conv.format, conv.method), []).append(conv)
    lines = []
    for (qtype, fmt, method), items in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        error = max(c.max_abs_error for c in items)
        rel = max((c.max_abs_error / c.max_abs if c.max_abs else 0.0) for c in items)
        rms = max((c.rms_error / c.rms if c.rms else 0.0) for c in items)
        line = f"{len(items)} x {qtype} -> {fmt or 'float32'} ({method}"
        if method in ("repacked", "requantized"):
            line += (f"; max abs error {error:.3g}, at most {rel:.2%} of a tensor's max |w|, "
                     f"rms error at most {rms:.2%} of its rms")
        lines.append(line + ")")
    return lines
