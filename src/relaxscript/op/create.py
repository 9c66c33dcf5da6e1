"""Tensor creation: full/zeros/ones (and ``*_like``), arange, triu/tril.

``arange(start, end, step)`` takes scalar values (``R.prim_value``) that
may be symbolic: its length is ``ceildiv(end - start, step)``, clamped at 0
unless that is provably unneeded; a symbolic step must be provably positive
(otherwise only the rank is known).
"""
from __future__ import annotations

import math

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import PrimStructInfo, TensorStructInfo
from ._convert import as_prim_value, as_shape, as_tensor, dtype_of, make_call
from ._infer_util import (attr_dtype, attr_int, format_sinfo, shape_arg, simplify, simplify_shape,
                          sinfo_of, tensor_arg)
from .registry import OpAttributeError, register_op


def _opt_dtype(dtype, op: str):
    return None if dtype is None else attr_dtype(dtype, op)


# ---------------------------------------------------------------- full / zeros / ones
def full(shape, fill_value, dtype=None):
    """R.full(shape, fill_value, dtype=None): a tensor of ``shape`` filled with a scalar."""
    dtype = _opt_dtype(dtype, "full")
    return make_call("relax.full", [as_shape(shape), as_tensor(fill_value, dtype)], {"dtype": dtype})


def _scalar_fill(ctx, call, index: int) -> TensorStructInfo:
    fill = tensor_arg(call, index, ctx, "fill value")
    if fill.ndim > 0:
        ctx.error(f"{call.op.name}: fill value must be a scalar tensor, got {format_sinfo(fill)}")
    return fill


def _infer_full(call, ctx) -> TensorStructInfo:
    shape = shape_arg(call, 0, ctx)
    dtype = call.attrs.get("dtype") or _scalar_fill(ctx, call, 1).dtype
    if shape.values is None:
        return TensorStructInfo(None, dtype, shape.ndim)
    return TensorStructInfo(simplify_shape(ctx, shape.values), dtype)


def _make_filled(name: str, value):
    def constructor(shape, dtype="float32"):
        return make_call("relax." + name, [as_shape(shape)], {"dtype": attr_dtype(dtype, name)})

    def infer(call, ctx):
        shape = shape_arg(call, 0, ctx)
        if shape.values is None:
            return TensorStructInfo(None, call.attrs["dtype"], shape.ndim)
        return TensorStructInfo(simplify_shape(ctx, shape.values), call.attrs["dtype"])

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(shape, dtype='float32'): a tensor filled with {value}."
    register_op("relax." + name, infer, lambda shape, dtype: np.full(tuple(shape), value, dtype),
                attr_names=("dtype",), constructor=constructor)
    return constructor


register_op("relax.full", _infer_full,
            lambda shape, fill_value, dtype=None: np.full(tuple(shape), fill_value,
                                                          dtype or np.asarray(fill_value).dtype),
            attr_names=("dtype",), constructor=full)
zeros = _make_filled("zeros", 0)
ones = _make_filled("ones", 1)


# ---------------------------------------------------------------- *_like
def full_like(x, fill_value, dtype=None):
    """R.full_like(x, fill_value, dtype=None): x's shape, x's dtype unless given."""
    dtype = _opt_dtype(dtype, "full_like")
    x = as_tensor(x)
    fill = as_tensor(fill_value, dtype or dtype_of(x))
    return make_call("relax.full_like", [x, fill], {"dtype": dtype})


def _infer_full_like(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    _scalar_fill(ctx, call, 1)
    return TensorStructInfo(x.shape, call.attrs.get("dtype") or x.dtype, x.ndim)


def _make_filled_like(name: str, value):
    def constructor(x, dtype=None):
        return make_call("relax." + name, [as_tensor(x)], {"dtype": _opt_dtype(dtype, name)})

    def infer(call, ctx):
        x = tensor_arg(call, 0, ctx)
        return TensorStructInfo(x.shape, call.attrs.get("dtype") or x.dtype, x.ndim)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(x, dtype=None): x's shape filled with {value}."
    register_op("relax." + name, infer,
                lambda x, dtype=None: np.full(x.shape, value, dtype or x.dtype),
                attr_names=("dtype",), constructor=constructor)
    return constructor


register_op("relax.full_like", _infer_full_like,
            lambda x, fill_value, dtype=None: np.full(x.shape, fill_value, dtype or x.dtype),
            attr_names=("dtype",), constructor=full_like)
zeros_like = _make_filled_like("zeros_like", 0)
ones_like = _make_filled_like("ones_like", 1)


# ---------------------------------------------------------------- arange
def arange(start, end=None, step=1, dtype=None):
    """R.arange(start, end=None, step=1, dtype=None): like ``np.arange``; bounds may be symbolic."""
    if end is None:
        start, end = 0, start
    dtype = _opt_dtype(dtype, "arange")
    if isinstance(step, (int, float)) and step == 0:
        raise OpAttributeError("R.arange: step must be non-zero")
    return make_call("relax.arange", [as_prim_value(v) for v in (start, end, step)], {"dtype": dtype})


def _scalar_values(ctx, call):
    values = []
    for i in range(3):
        sinfo = sinfo_of(call.args[i])
        if not isinstance(sinfo, PrimStructInfo):
            ctx.error(f"relax.arange: argument {i} must be a scalar, got {format_sinfo(sinfo)}")
        values.append(sinfo)
    return values


def _infer_arange(call, ctx) -> TensorStructInfo:
    start, end, step = _scalar_values(ctx, call)
    is_float = any(dt.is_float(s.dtype) for s in (start, end, step))
    dtype = call.attrs.get("dtype") or ("float32" if is_float else "int64")
    if any(s.value is None for s in (start, end, step)):
        return TensorStructInfo(None, dtype, 1)
    if is_float:
        literals = [s.value.value for s in (start, end, step)
                    if isinstance(s.value, (E.IntImm, E.FloatImm))]
        if len(literals) < 3:
            return TensorStructInfo(None, dtype, 1)
        lo, hi, by = literals
        if by == 0:
            ctx.error("relax.arange: step must be non-zero")
        return TensorStructInfo([max(math.ceil((hi - lo) / by), 0)], dtype)
    lo, hi, by = start.value, end.value, step.value
    if E.is_const_int(by, 0):
        ctx.error("relax.arange: step must be non-zero")
    if ctx.analyzer.can_prove(E.GT(by, 0)):
        span = hi - lo
    elif ctx.analyzer.can_prove(E.LT(by, 0)):
        span, by = lo - hi, -by
    else:
        return TensorStructInfo(None, dtype, 1)
    length = E.floordiv(span + by - 1, by)
    if not ctx.analyzer.can_prove(E.GE(span, 0)):
        length = E.max_(length, 0)
    return TensorStructInfo([simplify(ctx, length)], dtype)


def _arange_reference(start, end, step, dtype=None):
    if dtype is None:
        is_float = any(np.issubdtype(np.asarray(v).dtype, np.floating) for v in (start, end, step))
        dtype = "float32" if is_float else "int64"
    result = np.arange(start, end, step, dtype=dtype)
    bounds = [np.asarray(v) for v in (start, end, step)]
    if all(b.dtype.kind in "iu" for b in bounds):   # the exact length of integer bounds
        lo, hi, by = (int(b) for b in bounds)
        length = max(0, -((lo - hi) // by)) if by > 0 else max(0, -((hi - lo) // -by))
        if length != len(result):
            # NumPy sizes a float arange in floating point: 2**63 - 1 float32 values came back
            # empty (the reference then reported a wrong result shape, not the allocation)
            raise MemoryError(f"arange of {length} elements")
    return result


register_op("relax.arange", _infer_arange, _arange_reference, attr_names=("dtype",),
            constructor=arange)


# ---------------------------------------------------------------- triu / tril
def _make_triangle(name: str, fn):
    def constructor(x, k: int = 0):
        return make_call("relax." + name, [as_tensor(x)], {"k": attr_int(k, name, "k")})

    def infer(call, ctx):
        x = tensor_arg(call, 0, ctx)
        if 0 <= x.ndim < 2:
            ctx.error(f"relax.{name} needs a tensor with at least 2 dims, got {format_sinfo(x)}")
        return TensorStructInfo(x.shape, x.dtype, x.ndim)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(x, k=0): NumPy {name} of the last two dims."
    register_op("relax." + name, infer, lambda x, k=0: fn(x, k), attr_names=("k",),
                constructor=constructor)
    return constructor


triu = _make_triangle("triu", np.triu)
tril = _make_triangle("tril", np.tril)

__all__ = ["full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "arange", "triu", "tril"]
