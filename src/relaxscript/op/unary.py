"""Elementwise unary operators (``R.exp``, ``R.abs``, ``R.isnan``, ``R.clip``, ...).

The output has the input's shape. Math functions that only make sense on
floating point (exp, log, sigmoid, ...) reject integer tensors; rounding and
sign functions keep the dtype; predicates give bool.
"""
from __future__ import annotations

import math

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import format_sinfo, tensor_arg
from .registry import OpAttributeError, register_op

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf_numpy(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(x.dtype) if x.size else np.zeros_like(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (NumPy function, result kind): "float" = float-only, dtype kept;
# "int" = integer (or bool) only, dtype kept; "same" = any dtype, dtype kept; "bool" = result is bool.
_UNARY = {
    "abs": (np.abs, "same"),
    "negative": (np.negative, "same"),
    "square": (np.square, "same"),
    "sign": (np.sign, "same"),
    "floor": (np.floor, "same"),
    "ceil": (np.ceil, "same"),
    "round": (np.round, "same"),
    "exp": (np.exp, "float"),
    "log": (np.log, "float"),
    "sqrt": (np.sqrt, "float"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "float"),
    "sin": (np.sin, "float"),
    "cos": (np.cos, "float"),
    "tan": (np.tan, "float"),
    "tanh": (np.tanh, "float"),
    "sigmoid": (_sigmoid, "float"),
    "erf": (erf_numpy, "float"),
    "trunc": (np.trunc, "same"),
    "asin": (np.arcsin, "float"),
    "acos": (np.arccos, "float"),
    "atan": (np.arctan, "float"),
    "sinh": (np.sinh, "float"),
    "cosh": (np.cosh, "float"),
    "asinh": (np.arcsinh, "float"),
    "acosh": (np.arccosh, "float"),
    "atanh": (np.arctanh, "float"),
    "bitwise_not": (np.invert, "int"),
    "isnan": (np.isnan, "bool"),
    "isinf": (np.isinf, "bool"),
    "isfinite": (np.isfinite, "bool"),
    "logical_not": (np.logical_not, "bool"),
}


def infer_elementwise(call, ctx, kind: str = "same") -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    if kind == "float" and x.dtype is not None and not dt.is_float(x.dtype):
        ctx.error(f"{call.op.name} requires a floating-point tensor, got {format_sinfo(x)}")
    if kind == "int" and x.dtype is not None and not (dt.is_int(x.dtype) or dt.is_bool(x.dtype)):
        ctx.error(f"{call.op.name} requires an integer tensor, got {format_sinfo(x)}")
    dtype = "bool" if kind == "bool" else x.dtype
    return TensorStructInfo(x.shape, dtype, x.ndim)


def _make_unary(name: str, fn, kind: str):
    op_name = "relax." + name

    def constructor(x):
        return make_call(op_name, [as_tensor(x)])

    def reference(x):
        out = fn(x)
        return np.asarray(out, dtype=np.bool_ if kind == "bool" else x.dtype)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(x): elementwise {name}."
    register_op(op_name, lambda call, ctx: infer_elementwise(call, ctx, kind), reference,
                constructor=constructor)
    return constructor


for _name, (_fn, _kind) in _UNARY.items():
    globals()[_name] = _make_unary(_name, _fn, _kind)


# ---------------------------------------------------------------- clip
def _constant_prim(value):
    """The number a constant ``R.prim_value`` holds (anything else unchanged)."""
    from ..expr import PrimValue
    if isinstance(value, PrimValue) and isinstance(value.value, (E.IntImm, E.FloatImm)):
        return value.value.value
    return value


def clip(x, min, max):  # noqa: A002 - names follow R.clip
    """R.clip(x, min, max): clamp every element to [min, max]; the bounds are numbers, or
    constant ``R.prim_value(n)`` as TVM's frontends write them."""
    lo = check_attr_number(_constant_prim(min), "clip", "min")
    hi = check_attr_number(_constant_prim(max), "clip", "max")
    if lo > hi:
        raise OpAttributeError(f"R.clip: min {lo} is greater than max {hi}")
    return make_call("relax.clip", [as_tensor(x)], {"min": lo, "max": hi})


def _clip_reference(x, min, max):  # noqa: A002
    return np.asarray(np.clip(x, min, max), dtype=x.dtype)


register_op("relax.clip", infer_elementwise, _clip_reference, attr_names=("min", "max"),
            constructor=clip)

__all__ = [*_UNARY, "clip"]
