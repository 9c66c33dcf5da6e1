"""Shape values: ``R.shape_of(x)`` (a tensor's shape as a first-class value) and the
conversions ``R.shape_to_tensor`` / ``R.tensor_to_shape`` (run by their NumPy
references: a shape value lives in the VM, not in a kernel)."""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import ShapeStructInfo, TensorStructInfo
from ._convert import as_shape, as_tensor, make_call
from ._infer_util import const_value, format_sinfo, shape_arg, tensor_arg
from .registry import register_op


def shape_of(x):
    """R.shape_of(x): ``R.Shape`` holding x's (symbolic) shape."""
    return make_call("relax.shape_of", [as_tensor(x)])


def _infer_shape_of(call, ctx) -> ShapeStructInfo:
    x = tensor_arg(call, 0, ctx)
    return ShapeStructInfo(x.shape, x.ndim)


register_op("relax.shape_of", _infer_shape_of,
            lambda x: tuple(int(d) for d in np.shape(x)), constructor=shape_of)

__all__ = ["shape_of"]


# ---------------------------------------------------------------- shape <-> tensor
def shape_to_tensor(expr):
    """R.shape_to_tensor(expr): a shape value as a 1-D int64 tensor."""
    return make_call("relax.shape_to_tensor", [as_shape(expr)])


def _infer_shape_to_tensor(call, ctx) -> TensorStructInfo:
    shape = shape_arg(call, 0, ctx)
    if shape.ndim < 0:
        return TensorStructInfo(None, "int64", 1)
    return TensorStructInfo([E.IntImm(shape.ndim)], "int64")


def tensor_to_shape(expr):
    """R.tensor_to_shape(expr): a 1-D integer tensor of static length as a shape value, whose
    values are known only at run time (``R.match_cast`` names them)."""
    return make_call("relax.tensor_to_shape", [as_tensor(expr)])


def _infer_tensor_to_shape(call, ctx) -> ShapeStructInfo:
    x = tensor_arg(call, 0, ctx)
    if x.dtype is not None and not dt.is_int(x.dtype):
        ctx.error(f"relax.tensor_to_shape: expects an integer tensor, got {format_sinfo(x)}")
    if x.ndim >= 0 and x.ndim != 1:
        ctx.error(f"relax.tensor_to_shape: expects a 1-D tensor, got {format_sinfo(x)}")
    length = const_value(x.shape[0]) if x.shape is not None else None
    if length is None:
        ctx.error(f"relax.tensor_to_shape: the length of {format_sinfo(x)} (the number of dims) "
                  f"must be a constant")
    return ShapeStructInfo(None, length)


def _tensor_to_shape_reference(x):
    if np.any(x < 0):
        raise ValueError(f"R.tensor_to_shape: a shape has no negative dims, got {x.tolist()}")
    return tuple(int(v) for v in x)


register_op("relax.shape_to_tensor", _infer_shape_to_tensor,
            lambda shape: np.asarray(shape, dtype="int64").reshape(-1), constructor=shape_to_tensor)
register_op("relax.tensor_to_shape", _infer_tensor_to_shape, _tensor_to_shape_reference,
            constructor=tensor_to_shape)

__all__ += ["shape_to_tensor", "tensor_to_shape"]
