"""Elementwise unary ops, activations (``R.nn.relu`` ...), ``clip`` and ``astype``.

Formulas follow the op registry's NumPy references operation by operation,
so results agree to rounding.
"""
from __future__ import annotations

import math

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import compute

from .common import op_short_name, truthy
from .registry import register_legalize


def _intrin(name: str):
    return lambda x: E.call_intrin(name, x)


def _float_only(name: str, otherwise):
    """An intrinsic on floats; ``otherwise(x)`` for integers (floor of an int is the int)."""
    return lambda x: E.call_intrin(name, x) if dt.is_float(x.dtype) else otherwise(x)


def _sign(x):
    one, zero = E.const(1, x.dtype), E.const(0, x.dtype)
    if dt.is_uint(x.dtype):
        return E.Select(E.GT(x, zero), one, zero)
    # a float that is neither > 0 nor < 0 is its own sign: 0, -0 and NaN (NumPy's sign(nan) is nan)
    rest = x if dt.is_float(x.dtype) else zero
    return E.Select(E.GT(x, zero), one, E.Select(E.LT(x, zero), E.const(-1, x.dtype), rest))


def _isfinite(x):
    if not dt.is_float(x.dtype):
        return E.IntImm(True, "bool")
    return E.Not(E.Or(E.call_intrin("isnan", x), E.call_intrin("isinf", x)))


_UNARY = {
    "abs": _intrin("abs"),
    "negative": lambda x: -x,
    "square": lambda x: x * x,
    "sign": _sign,
    "floor": _float_only("floor", lambda x: x),
    "ceil": _float_only("ceil", lambda x: x),
    "round": _float_only("round", lambda x: x),
    **{name: _intrin(name) for name in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan",
                                        "tanh", "sigmoid", "erf")},
    "trunc": _float_only("trunc", lambda x: x),
    **{name: _intrin(name) for name in ("asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                                        "atanh", "bitwise_not")},
    "isnan": _float_only("isnan", lambda x: E.IntImm(False, "bool")),
    "isinf": _float_only("isinf", lambda x: E.IntImm(False, "bool")),
    "isfinite": _isfinite,
    "logical_not": lambda x: E.Not(truthy(x)),
}


def _gelu(x):
    half, one = E.const(0.5, x.dtype), E.const(1.0, x.dtype)
    return half * x * (one + E.call_intrin("erf", x / E.const(math.sqrt(2.0), x.dtype)))


def _gelu_tanh(x):
    half, one = E.const(0.5, x.dtype), E.const(1.0, x.dtype)
    inner = E.const(math.sqrt(2.0 / math.pi), x.dtype) * (x + E.const(0.044715, x.dtype) * (x * x * x))
    return half * x * (one + E.call_intrin("tanh", inner))


_ACTIVATIONS = {
    "relu": lambda x: E.max_(x, E.const(0, x.dtype)),
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "silu": lambda x: x * E.call_intrin("sigmoid", x),
}


def _elementwise(call, ctx, fn, name: str | None = None):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    name = name or op_short_name(call)
    out = compute(te.out_shape(), lambda *idx: fn(x[idx]), "T_" + name, te.out_dtype())
    return te.emit(name, out)


def _make(fn):
    return lambda ctx, call: _elementwise(call, ctx, fn)


for _name, _fn in _UNARY.items():
    register_legalize("relax." + _name)(_make(_fn))
for _name, _fn in _ACTIVATIONS.items():
    register_legalize("relax.nn." + _name)(_make(_fn))


@register_legalize("relax.clip")
def _clip(ctx, call):
    lo, hi = call.attrs["min"], call.attrs["max"]
    dtype = call.args[0].struct_info.dtype
    if not dt.is_float(dtype):
        # NumPy clips in floating point and the cast back truncates: for integer
        # inputs that equals clipping to the truncated bounds. A bound past the dtype's range on
        # its own side clips nothing (NumPy drops it); one past the other side NumPy refuses.
        lo, hi = int(lo), int(hi)
        smallest, largest = dt.int_range(dtype)
        if lo > largest or hi < smallest:
            raise ValueError(f"R.clip of a {dtype} tensor: the bound {lo if lo > largest else hi} is outside "
                             f"the {dtype} range [{smallest}, {largest}] (NumPy refuses it too)")
        lo, hi = max(lo, smallest), min(hi, largest)
    low, high = E.const(lo, dtype), E.const(hi, dtype)
    return _elementwise(call, ctx, lambda x: E.min_(E.max_(x, low), high))


@register_legalize("relax.astype")
def _astype(ctx, call):
    dtype = call.attrs["dtype"]
    return _elementwise(call, ctx, lambda x: E.cast(dtype, x))
