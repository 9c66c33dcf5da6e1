"""Argument conversion for operator constructors.

Constructors accept Python values where TVMScript users write them: a list
of ints/PrimExprs where a shape is expected, a number where a tensor or a
scalar is expected. Leaves made here carry their annotation already (the
same one the normalizer would give them).
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..expr import Call, Constant, Expr, PrimValue, ShapeExpr, Tuple
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from .registry import OpAttributeError, get_op


def make_call(name: str, args, attrs: dict | None = None, sinfo_args=()) -> Call:
    return Call(get_op(name), args, attrs or {}, sinfo_args)


def _default_dtype(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int64"
    return "float32"


def constant(value, dtype: str | None = None) -> Constant:
    if dtype is None:
        dtype = value.dtype.name if isinstance(value, np.ndarray) else _default_dtype(value)
    data = np.asarray(value, dtype=dt.to_numpy(dt.normalize(dtype)))
    const = Constant(data)
    const.struct_info = TensorStructInfo(data.shape, data.dtype.name)
    return const


def as_tensor(value, dtype_hint: str | None = None) -> Expr:
    """An Expr as is; a number or array becomes a Constant.

    A Python scalar takes ``dtype_hint`` (the other operand's dtype) when it
    is representable there, so ``x + 1.0`` keeps x's float16/float32.
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        dtype = _default_dtype(value)
        if dtype_hint is not None and (dt.is_float(dtype_hint) or dtype != "float32"):
            if not (dtype == "bool" and dtype_hint != "bool"):
                dtype = dtype_hint
        return constant(value, dtype)
    if isinstance(value, (np.ndarray, list)):
        return constant(np.asarray(value))
    raise TypeError(f"cannot use {value!r} ({type(value).__name__}) as a tensor argument")


def dtype_of(expr) -> str | None:
    sinfo = getattr(expr, "struct_info", None)
    return getattr(sinfo, "dtype", None) if isinstance(sinfo, TensorStructInfo) else None


def as_shape(value) -> Expr:
    """A ShapeExpr (or an Expr holding a shape) as is; a list/tuple of dims becomes a ShapeExpr.
    A tuple of ``R.prim_value``s (TVM writes ``(R.prim_value(0),)`` for a shape argument) is
    the shape of their values."""
    if isinstance(value, Tuple) and all(isinstance(f, PrimValue) for f in value.fields):
        value = [f.value for f in value.fields]
    if isinstance(value, (list, tuple)) and value and all(isinstance(f, PrimValue) for f in value):
        value = [f.value for f in value]
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, np.integer, E.PrimExpr)):
        value = (value,)
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"expected a shape (list of ints or PrimExprs), got {value!r}")
    dims = []
    for d in value:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer, E.PrimExpr)):
            raise TypeError(f"shape entries must be ints or PrimExprs, got {d!r}")
        dims.append(E.convert(int(d)) if isinstance(d, (int, np.integer)) else d)
    shape = ShapeExpr(dims)
    shape.struct_info = ShapeStructInfo(shape.values)
    return shape


def as_prim_value(value, dtype: str | None = None) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float, np.generic)):
        value = E.const(value.item() if isinstance(value, np.generic) else value, dtype)
    if not isinstance(value, E.PrimExpr):
        raise TypeError(f"expected a scalar, got {value!r}")
    prim = PrimValue(value)
    prim.struct_info = PrimStructInfo(prim.value.dtype, prim.value)
    return prim


def as_tuple(values) -> Expr:
    if isinstance(values, Expr):
        return values
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"expected a list of tensors, got {values!r}")
    return Tuple([as_tensor(v) for v in values])


def as_call_args(values) -> Expr:
    """The argument tuple of a DPS call. As in TVM, a single value that is not a tuple
    (``R.call_tir(f, x, ...)``) is the one argument: it is wrapped in a Tuple."""
    if isinstance(values, Expr):
        sinfo = getattr(values, "struct_info", None)
        if not isinstance(values, Tuple) and sinfo is not None and not isinstance(sinfo, TupleStructInfo):
            return Tuple([values])
        return values
    return as_tuple(values)


def check_attr_number(value, op: str, name: str):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise OpAttributeError(f"R.{op}: {name} must be a number, got {value!r}")
    return value.item() if isinstance(value, np.generic) else value
