"""``R.collapse_sum_to(data, shape)`` and ``R.collapse_sum_like(data, collapse_target)``:
sum ``data`` down to a shape that broadcasts to it (the gradient of a broadcast):
leading dims are summed away, and so is every dim where the target has 1."""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo
from ._convert import as_shape, as_tensor, make_call
from ._infer_util import (format_dim, format_sinfo, prove_not_equal, shape_arg, simplify_shape,
                          tensor_arg)
from .registry import register_op


def collapse_sum_to(data, shape):
    """R.collapse_sum_to(data, shape)."""
    return make_call("relax.collapse_sum_to", [as_tensor(data), as_shape(shape)])


def collapse_sum_like(data, collapse_target):
    """R.collapse_sum_like(data, collapse_target): collapse to ``collapse_target``'s shape."""
    return make_call("relax.collapse_sum_like", [as_tensor(data), as_tensor(collapse_target)])


def _collapsed(call, ctx, data: TensorStructInfo, values, ndim: int, target_text: str):
    if data.ndim >= 0 and ndim > data.ndim:
        ctx.error(f"{call.op.name}: {target_text} has more dims than data {format_sinfo(data)}")
    if values is None:
        return TensorStructInfo(None, data.dtype, ndim)
    if data.shape is not None:
        offset = data.ndim - len(values)
        one = E.IntImm(1)
        for i, want in enumerate(values):
            have = data.shape[offset + i]
            if prove_not_equal(ctx, want, one) and prove_not_equal(ctx, want, have):
                ctx.error(f"{call.op.name}: {target_text} does not broadcast to data "
                          f"{format_sinfo(data)}: dimension {i} is {format_dim(want)}")
    return TensorStructInfo(simplify_shape(ctx, values), data.dtype)


def _infer_collapse_sum_to(call, ctx) -> TensorStructInfo:
    data, target = tensor_arg(call, 0, ctx, "data"), shape_arg(call, 1, ctx)
    return _collapsed(call, ctx, data, target.values, target.ndim, f"shape {format_sinfo(target)}")


def _infer_collapse_sum_like(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    target = tensor_arg(call, 1, ctx, "collapse_target")
    return _collapsed(call, ctx, data, target.shape, target.ndim,
                      f"collapse_target {format_sinfo(target)}")


def collapse_sum_reference(data, shape):
    shape = tuple(shape)
    lead = data.ndim - len(shape)
    if lead < 0 or np.broadcast_shapes(shape, data.shape) != data.shape:
        raise ValueError(f"collapse_sum: shape {shape} does not broadcast to {data.shape}")
    out = data.sum(axis=tuple(range(lead)), dtype=data.dtype)
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and out.shape[i] != 1)
    return np.asarray(out.sum(axis=axes, keepdims=True, dtype=data.dtype), dtype=data.dtype)


register_op("relax.collapse_sum_to", _infer_collapse_sum_to, collapse_sum_reference,
            constructor=collapse_sum_to)
register_op("relax.collapse_sum_like", _infer_collapse_sum_like,
            lambda data, target: collapse_sum_reference(data, target.shape),
            constructor=collapse_sum_like)

__all__ = ["collapse_sum_to", "collapse_sum_like"]
