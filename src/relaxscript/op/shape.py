"""``R.shape_of(x)``: the shape of a tensor as a first-class shape value."""
from __future__ import annotations

import numpy as np

from ..struct_info import ShapeStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import tensor_arg
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
