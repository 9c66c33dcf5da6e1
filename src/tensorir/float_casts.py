"""Float -> integer conversion of values the integer type cannot hold, one rule for every level.

C leaves the conversion of NaN, +-inf and out-of-range floats undefined, and so does NumPy: its
answer is whatever the x86-64 instructions give, and for uint32 it even depends on the array's
length. NumPy 2.4 on an AVX-512 host converts a contiguous run of 4/8/16 float32 values to
uint32 in a SIMD loop that gives 2**31 for NaN, -inf and values below -2**31, and 0 above 2**32,
while its element loop (a single value, the ragged tail, a strided array) gives the low 32 bits of
the int64 conversion (-1e10 -> 2884901888, NaN -> 0). A reference that called ``astype`` gave
other values for ``(4,)`` and ``(3,)`` arrays.

The rule, NumPy's element loop on x86-64 (the code GCC emits for a C cast without AVX-512):

- int32 and int64: in range, truncation toward zero; otherwise the smallest integer of the width;
- int8, int16, uint8, uint16: the low bits of the int32 conversion;
- uint32: the low bits of the int64 conversion;
- uint64: below 2**63 the int64 conversion's bits, from 2**63 on those of ``x - 2**63`` with the
  top bit flipped (so 2**64, inf and beyond give 0, NaN and -inf 2**63).

``backends.source_emitter.float_to_int_helpers`` emits the same rule as C / OpenCL / CUDA helpers;
the loop interpreter, the reference interpreter and the constant folder use ``float_to_int``.
"""
from __future__ import annotations

import numpy as np

# each integer dtype: the conversion whose low bits it takes
VIA = {"int8": "int32", "int16": "int32", "int32": "int32", "uint8": "int32", "uint16": "int32",
       "int64": "int64", "uint32": "int64", "uint64": "uint64"}


def _signed(x: np.ndarray, bits: int, dtype) -> np.ndarray:
    limit = x.dtype.type(2.0 ** bits)
    inside = (x >= -limit) & (x < limit)
    out = np.where(inside, x, 0).astype(dtype)   # only in-range values reach astype
    out[~inside] = np.iinfo(dtype).min
    return out


def float_to_int(value, dtype: str):
    """``value`` (a float array or scalar) converted to integer ``dtype`` by the rule above,
    shaped as ``value`` (a 0-d result for a scalar)."""
    x = np.asarray(value)
    if x.dtype == np.float16:
        x = x.astype(np.float32)   # exact
    x = np.atleast_1d(x)
    via = VIA[dtype]
    if via == "int32":
        out = _signed(x, 31, np.int32)
    elif via == "int64":
        out = _signed(x, 63, np.int64)
    else:
        top = x.dtype.type(2.0 ** 63)
        high = x >= top
        low_bits = _signed(np.where(high, x - top, x), 63, np.int64).view(np.uint64)
        out = np.where(high, low_bits ^ np.uint64(1 << 63), low_bits)
    out = out.astype(dtype)   # integer -> integer: wraps to the low bits
    return out.reshape(np.shape(value))


def is_float_to_int(src, dst) -> bool:
    """Whether converting NumPy dtype ``src`` to ``dst`` takes the rule above."""
    src, dst = np.dtype(src), np.dtype(dst)
    return src.kind == "f" and dst.kind in "iu" and dst.name in VIA
