"""ggml tensor types: their block sizes, and float32 dequantization of their blocks.

Every type's layout is a block of ``block`` consecutive values of a row,
little-endian. The types llama.cpp users download are decoded here in NumPy
(no dependency); the rarer ones (IQ*, TQ*, MXFP4, ...) through the ``gguf``
package's ``gguf.quants.dequantize`` when it is installed. A type neither
knows (Q8_1, Q8_K: activation-only types; integer tensors) is an error
naming it.

Layouts decoded here (``d``/``dmin``/``m`` are float16, ``q`` the code):

- BF16: the high 16 bits of a float32.
- Q4_0 (32, 18 B): ``d``, 16 bytes of nibbles (byte ``i``: value ``i`` low,
  value ``i + 16`` high); value ``d*(q - 8)``.
- Q4_1 (32, 20 B): ``d``, ``m``, nibbles as Q4_0; value ``d*q + m``.
- Q5_0 (32, 22 B): ``d``, ``qh`` (uint32: bit ``i`` is bit 4 of value ``i``),
  nibbles as Q4_0; value ``d*(q - 16)``.
- Q5_1 (32, 24 B): ``d``, ``m``, ``qh``, nibbles; value ``d*q + m``.
- Q8_0 (32, 34 B): ``d``, 32 int8; value ``d*q``.
- Q2_K (256, 84 B): ``scales[16]`` (low nibble scale, high nibble min of
  each 16 values), ``qs[64]``, ``d``, ``dmin``; value ``d*sc*q - dmin*m``.
  Value ``128*h + 32*j + l`` is bits ``2j..2j+1`` of ``qs[32*h + l]``, its
  sub-block ``8*h + 2*j + l // 16``.
- Q3_K (256, 110 B): ``hmask[32]``, ``qs[64]``, ``scales[12]`` (sixteen 6-bit
  scales, offset 32), ``d``; value ``d*(sc - 32)*(q - 4*(1 - hbit))`` with
  ``q`` placed as Q2_K's and ``hbit`` bit ``4*h + j`` of ``hmask[l]``. Scale
  ``i``: low 4 bits from ``scales[i % 8] >> 4*(i // 8)``, high 2 bits from
  ``scales[8 + i % 4] >> 2*(i // 4)``.
- Q4_K (256, 144 B): ``d``, ``dmin``, ``scales[12]`` (eight 6-bit scales and
  mins of 32 values), ``qs[128]``; value ``d*sc*q - dmin*m``. Sub-block
  ``j < 4``: ``sc = s[j] & 63``, ``m = s[j+4] & 63``; ``j >= 4``: ``sc = s[j+4] & 15 |
  (s[j-4] >> 6) << 4``, ``m = s[j+4] >> 4 | (s[j] >> 6) << 4``. Values
  ``64*c .. 64*c+31`` are the low nibbles of ``qs[32*c ..]``, the next 32 the
  high nibbles.
- Q5_K (256, 176 B): ``d``, ``dmin``, ``scales[12]`` (as Q4_K), ``qh[32]``,
  ``qs[128]`` (as Q4_K); bit 4 of value ``32*k + l`` is bit ``k`` of ``qh[l]``.
- Q6_K (256, 210 B): ``ql[128]``, ``qh[64]``, ``scales[16]`` (int8, one per 16
  values), ``d``; value ``d*sc*(q - 32)``. Half ``h`` (128 values): value
  ``128*h + 32*k + l`` has low nibble from ``ql[64*h + l + 32*(k % 2)]``
  (``k < 2`` low, else high nibble) and high 2 bits ``2k..2k+1`` of
  ``qh[32*h + l]``; its scale ``scales[8*h + 2*k + l // 16]``.

Products are formed exactly in float32 before the one rounding of a sum, so
the values equal ``gguf.quants.dequantize``'s bit for bit (checked in tests).
"""
from __future__ import annotations

import numpy as np

__all__ = ["GGML_TYPES", "TYPE_CODES", "NATIVE_DEQUANTIZE", "dequantize_blocks", "dequantizable",
           "block_layout", "k4_scales_mins"]

# code -> (name, values per block, bytes per block): ggml's type table
GGML_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
              6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
              10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
              13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
              16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
              19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
              22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
              26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
              30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
              40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18)}
TYPE_CODES = {name: code for code, (name, _, _) in GGML_TYPES.items()}
_LAYOUTS = {name: (block, nbytes) for name, block, nbytes in GGML_TYPES.values()}


def block_layout(name: str) -> tuple[int, int]:
    """(values per block, bytes per block) of ggml type ``name``."""
    return _LAYOUTS[name]


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 at byte ``start`` of each block, widened: shape (blocks, 1)."""
    return np.ascontiguousarray(blocks[:, start:start + 2]).view("<f2").astype(np.float32)


def _nibbles(packed: np.ndarray) -> np.ndarray:
    """Bytes (..., n) -> codes (..., 2n): the low nibbles, then the high ones."""
    return np.concatenate([packed & 0x0F, packed >> 4], axis=-1)


def _bits(packed: np.ndarray) -> np.ndarray:
    """Bytes (..., n) -> (..., 8n) bits, least significant bit of each byte first."""
    return np.unpackbits(packed, axis=-1, bitorder="little")


def k4_scales_mins(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K's 12 scale bytes (blocks, 12) -> the eight 6-bit scales and mins, (blocks, 8) each."""
    s = scales.astype(np.int32)
    low, high = s[:, 0:4], s[:, 4:8]
    tail = s[:, 8:12]
    sc = np.concatenate([low & 63, (tail & 15) | ((low >> 6) << 4)], axis=1)
    m = np.concatenate([high & 63, (tail >> 4) | ((high >> 6) << 4)], axis=1)
    return sc, m


def _k3_scales(scales: np.ndarray) -> np.ndarray:
    """Q3_K's 12 scale bytes (blocks, 12) -> sixteen signed scales (blocks, 16)."""
    s = scales.astype(np.int32)
    i = np.arange(16)
    low = (s[:, i % 8] >> (4 * (i // 8))) & 15
    high = (s[:, 8 + i % 4] >> (2 * (i // 4))) & 3
    return (low | (high << 4)) - 32


def _sub(values: np.ndarray, size: int) -> np.ndarray:
    """(blocks, n) -> (blocks, n // size, size): the sub-blocks that share a scale."""
    return values.reshape(values.shape[0], -1, size)


def _q4_0(b):
    return (_nibbles(b[:, 2:18]).astype(np.float32) - 8.0) * _half(b, 0)


def _q4_1(b):
    return _nibbles(b[:, 4:20]).astype(np.float32) * _half(b, 0) + _half(b, 2)


def _q5_codes(b, qh_at: int, qs_at: int) -> np.ndarray:
    return _nibbles(b[:, qs_at:qs_at + 16]) | (_bits(b[:, qh_at:qh_at + 4]) << 4)


def _q5_0(b):
    return (_q5_codes(b, 2, 6).astype(np.float32) - 16.0) * _half(b, 0)


def _q5_1(b):
    return _q5_codes(b, 4, 8).astype(np.float32) * _half(b, 0) + _half(b, 2)


def _q8_0(b):
    return b[:, 2:34].view(np.int8).astype(np.float32) * _half(b, 0)


def _k2_codes(qs: np.ndarray) -> np.ndarray:
    """Q2_K/Q3_K's 64 code bytes (blocks, 64) -> 2-bit codes (blocks, 256) in value order."""
    halves = qs.reshape(-1, 2, 1, 32)                            # (blocks, h, 1, l)
    shifts = (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)
    return ((halves >> shifts) & 3).reshape(-1, 256)             # value 128h + 32j + l


def _q2_k(b):
    scales = b[:, 0:16]
    codes = _k2_codes(b[:, 16:80]).astype(np.float32)
    d, dmin = _half(b, 80), _half(b, 82)
    sc = (d * (scales & 15).astype(np.float32))[:, :, None]
    m = (dmin * (scales >> 4).astype(np.float32))[:, :, None]
    return (sc * _sub(codes, 16) - m).reshape(-1, 256)


def _q3_k(b):
    hbits = _bits(b[:, 0:32]).reshape(-1, 32, 8)                  # (blocks, l, bit)
    # value 128h + 32j + l takes bit 4h + j of hmask[l]
    high = hbits.transpose(0, 2, 1).reshape(-1, 256)
    codes = _k2_codes(b[:, 32:96]).astype(np.int32) - 4 * (1 - high.astype(np.int32))
    scale = _half(b, 108) * _k3_scales(b[:, 96:108]).astype(np.float32)
    return (scale[:, :, None] * _sub(codes.astype(np.float32), 16)).reshape(-1, 256)


def _k4_codes(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K's 128 nibble bytes (blocks, 128) -> 4-bit codes (blocks, 256) in value order."""
    chunks = qs.reshape(-1, 4, 32)
    return np.concatenate([chunks & 15, chunks >> 4], axis=2).reshape(-1, 256)


def _k4_like(b, codes):
    d, dmin = _half(b, 0), _half(b, 2)
    sc, m = k4_scales_mins(b[:, 4:16])
    scale = (d * sc.astype(np.float32))[:, :, None]
    minimum = (dmin * m.astype(np.float32))[:, :, None]
    return (scale * _sub(codes.astype(np.float32), 32) - minimum).reshape(-1, 256)


def _q4_k(b):
    return _k4_like(b, _k4_codes(b[:, 16:144]))


def _q5_k(b):
    high = _bits(b[:, 16:48]).reshape(-1, 32, 8).transpose(0, 2, 1).reshape(-1, 256)
    return _k4_like(b, _k4_codes(b[:, 48:176]) | (high << 4))


def _q6_k(b):
    ql = b[:, 0:128].reshape(-1, 2, 2, 32)                        # (blocks, h, k % 2, l)
    low = np.concatenate([ql & 15, ql >> 4], axis=2)              # (blocks, h, k, l)
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    high = (qh >> (2 * np.arange(4, dtype=np.uint8)).reshape(1, 1, 4, 1)) & 3
    codes = (low | (high << 4)).astype(np.float32).reshape(-1, 256) - 32.0
    scale = _half(b, 208) * b[:, 192:208].view(np.int8).astype(np.float32)
    return (scale[:, :, None] * _sub(codes, 16)).reshape(-1, 256)


_BLOCK_DECODERS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0,
                   "Q2_K": _q2_k, "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k}
# the types this module decodes without the gguf package
NATIVE_DEQUANTIZE = ("F32", "F16", "BF16") + tuple(_BLOCK_DECODERS)

_GGUF_SUPPORT: dict[str, bool] = {}


def _gguf_quants():
    try:
        import gguf.quants
    except ImportError:
        return None
    return gguf


def _gguf_dequantizes(name: str) -> bool:
    """Whether the installed ``gguf`` package dequantizes ``name`` (tried once on a zero block)."""
    if name not in _GGUF_SUPPORT:
        gguf = _gguf_quants()
        ok = False
        if gguf is not None and hasattr(gguf.GGMLQuantizationType, name):
            block, nbytes = _LAYOUTS[name]
            try:
                gguf.quants.dequantize(np.zeros((1, nbytes), np.uint8), gguf.GGMLQuantizationType[name])
                ok = True
            except (NotImplementedError, ValueError, TypeError, KeyError, AttributeError):
                ok = False
        _GGUF_SUPPORT[name] = ok
    return _GGUF_SUPPORT[name]


def dequantizable(name: str) -> bool:
    """Whether ``dequantize_blocks`` can decode type ``name`` here (natively or with ``gguf``)."""
    return name in NATIVE_DEQUANTIZE or (name in _LAYOUTS and _gguf_dequantizes(name))


def dequantize_blocks(raw: np.ndarray, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32 values of ``raw`` bytes (row-major blocks of type ``name``) as a new ``shape`` array."""
    flat = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    if name == "F32":
        return flat.view("<f4").astype(np.float32).reshape(shape)
    if name == "F16":
        return flat.view("<f2").astype(np.float32).reshape(shape)
    if name == "BF16":   # the high half of a float32: exact
        return (flat.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    block, nbytes = _LAYOUTS[name]
    blocks = flat.reshape(-1, nbytes)
    with np.errstate(over="ignore", invalid="ignore"):   # corrupt scales decode to inf/nan, not warnings
        if name in _BLOCK_DECODERS:
            return _BLOCK_DECODERS[name](blocks).astype(np.float32, copy=False).reshape(shape)
        if _gguf_dequantizes(name):
            gguf = _gguf_quants()
            values = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[name])
            return np.asarray(values, dtype=np.float32).reshape(shape)
    raise ValueError(f"no dequantization for ggml type {name}")
