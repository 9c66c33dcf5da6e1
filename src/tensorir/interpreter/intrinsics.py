"""NumPy implementations of the math intrinsics in ``tensorir.expr.INTRINSICS``.

Each takes and returns arrays (or NumPy scalars); float32 inputs stay float32
wherever NumPy keeps them so, and the caller casts to the Call's dtype.
"""
from __future__ import annotations

import math

import numpy as np

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
}
