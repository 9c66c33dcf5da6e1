"""NumPy implementations of the math intrinsics in ``tensorir.expr.INTRINSICS``.

Each takes and returns arrays (or NumPy scalars); float32 inputs stay float32
wherever NumPy keeps them so, and the caller casts to the Call's dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import NegativeIntegerPowerError

_ERF = np.frompyfunc(math.erf, 1, 1)  # exact (libm) erf, element by element


def _erf(x):
    x = np.asarray(x)
    return np.asarray(_ERF(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)


def _one(x):
    return np.asarray(x).dtype.type(1)


def _rsqrt(x):
    return _one(x) / np.sqrt(x)


def _sigmoid(x):
    one = _one(x)
    return one / (one + np.exp(-x))


def _unsigned_bits(x):
    """``x``'s two's-complement bits as uint64 (its width in bits too)."""
    x = np.asarray(x)
    bits = x.dtype.itemsize * 8
    return x.astype(np.dtype(f"uint{bits}")).astype(np.uint64), bits


def _bit_length(y):
    """Bit length of each uint64 (a binary search: six steps whatever the width)."""
    n = np.zeros(y.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = y >= (np.uint64(1) << np.uint64(s))
        n = n + np.where(big, s, 0)
        y = np.where(big, y >> np.uint64(s), y)
    return n + (y > 0)


def _clz(x):
    y, bits = _unsigned_bits(x)
    return bits - _bit_length(y)


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def _popcount(x):
    y, bits = _unsigned_bits(x)
    total = np.zeros(y.shape, np.int64)
    for k in range(bits // 8):
        total = total + _BYTE_BITS[((y >> np.uint64(8 * k)) & np.uint64(255)).astype(np.int64)]
    return total


def _int_pow(x, y):
    """NumPy's integer power (wrapping); a negative exponent raises as NumPy's does."""
    if np.any(np.asarray(y) < 0):
        raise NegativeIntegerPowerError("T.int_pow: integers to negative integer powers are not allowed")
    return np.power(x, y)


INTRINSIC_IMPLS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": _rsqrt, "tanh": np.tanh,
    "sigmoid": _sigmoid, "erf": _erf, "pow": np.power, "abs": np.abs, "sin": np.sin,
    "cos": np.cos, "floor": np.floor, "ceil": np.ceil,
    "round": np.rint,  # half to even, like C's nearbyint under the default rounding mode
    "exp2": np.exp2, "log2": np.log2, "tan": np.tan, "isnan": np.isnan, "isinf": np.isinf,
    "trunc": np.trunc, "log1p": np.log1p, "exp10": lambda x: np.power(np.asarray(x).dtype.type(10), x),
    "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh,
    "atanh": np.arctanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atan2": np.arctan2,
    "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "bitwise_not": np.invert, "shift_left": np.left_shift, "shift_right": np.right_shift,
    "clz": _clz, "popcount": _popcount, "int_pow": _int_pow,
}
