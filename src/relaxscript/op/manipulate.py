"""Shape manipulation: reshape, flatten, permute_dims, expand_dims, squeeze,
broadcast_to, repeat, tile (NumPy semantics on symbolic shapes).

Slicing-like operators (concat, split, take, strided_slice) are in
``indexing.py``.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo
from ._convert import as_shape, as_tensor, make_call
from ._infer_util import (attr_axes, attr_int, const_value, format_dim, format_sinfo,
                          normalize_axes, product, prove_not_equal, shape_arg,
                          simplify, simplify_shape, tensor_arg)
from .registry import OpAttributeError, register_op


# ---------------------------------------------------------------- reshape / flatten
def reshape(x, shape):
    """R.reshape(x, shape): ``shape`` may hold one ``-1``, inferred from the element count."""
    return make_call("relax.reshape", [as_tensor(x), as_shape(shape)])


def _infer_reshape(call, ctx) -> TensorStructInfo:
    x, target = tensor_arg(call, 0, ctx), shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    dims = list(target.values)
    consts = [const_value(d) for d in dims]
    if any(c is not None and c < -1 for c in consts) or consts.count(-1) > 1:
        ctx.error(f"relax.reshape: invalid target shape {format_sinfo(target)} "
                  "(at most one -1, other dims non-negative)")
    inferred = consts.index(-1) if -1 in consts else None
    if x.shape is None:
        if inferred is not None:
            return TensorStructInfo(None, x.dtype, len(dims))
        return TensorStructInfo(simplify_shape(ctx, dims), x.dtype)
    total = simplify(ctx, product(x.shape))
    if inferred is not None:
        known = simplify(ctx, product(d for i, d in enumerate(dims) if i != inferred))
        if const_value(known) == 0:
            ctx.error(f"relax.reshape: cannot infer -1 in {format_sinfo(target)} for "
                      f"{format_sinfo(x)} (other dims have zero elements)")
        if prove_not_equal(ctx, total % known, 0):
            ctx.error(f"relax.reshape: {format_sinfo(x)} cannot be reshaped to "
                      f"{format_sinfo(target)}: {total} elements are not divisible by {known}")
        dims[inferred] = total // known
    elif prove_not_equal(ctx, product(dims), total):
        ctx.error(f"relax.reshape: {format_sinfo(x)} cannot be reshaped to {format_sinfo(target)}: "
                  "element counts differ")
    return TensorStructInfo(simplify_shape(ctx, dims), x.dtype)


def flatten(x):
    """R.flatten(x): all elements as one dimension."""
    return make_call("relax.flatten", [as_tensor(x)])


def _infer_flatten(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 1)
    return TensorStructInfo((simplify(ctx, product(x.shape)),), x.dtype)


register_op("relax.reshape", _infer_reshape, lambda x, shape: np.reshape(x, tuple(shape)),
            constructor=reshape)
register_op("relax.flatten", _infer_flatten, lambda x: np.reshape(x, (-1,)), constructor=flatten)


# ---------------------------------------------------------------- permute / expand / squeeze
def permute_dims(x, axes=None):
    """R.permute_dims(x, axes=None): transpose; reverses the axes when ``axes`` is None."""
    return make_call("relax.permute_dims", [as_tensor(x)],
                     {"axes": attr_axes(axes, "permute_dims", "axes")})


def _infer_permute_dims(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    axes = call.attrs.get("axes")
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype, len(axes) if axes is not None else -1)
    if axes is None:
        axes = tuple(range(x.ndim - 1, -1, -1))
    if len(axes) != x.ndim:
        ctx.error(f"relax.permute_dims: axes {axes} do not match the rank of {format_sinfo(x)}")
    axes = normalize_axes(ctx, call, axes, x.ndim, x)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    return TensorStructInfo([x.shape[a] for a in axes], x.dtype)


def expand_dims(x, axis):
    """R.expand_dims(x, axis): insert unit dims at the given positions of the output."""
    axis = attr_axes(axis, "expand_dims")
    if axis is None:
        raise OpAttributeError("R.expand_dims: axis is required")
    return make_call("relax.expand_dims", [as_tensor(x)], {"axis": axis})


def _infer_expand_dims(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    axis = call.attrs["axis"]
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    out_ndim = x.ndim + len(axis)
    inserted = set(normalize_axes(ctx, call, axis, out_ndim, x))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    rest = iter(x.shape)
    return TensorStructInfo([E.IntImm(1) if i in inserted else next(rest) for i in range(out_ndim)],
                            x.dtype)


def squeeze(x, axis=None):
    """R.squeeze(x, axis=None): drop unit dims (all of them when ``axis`` is None)."""
    return make_call("relax.squeeze", [as_tensor(x)], {"axis": attr_axes(axis, "squeeze")})


def _infer_squeeze(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    axis = call.attrs.get("axis")
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    one = E.IntImm(1)
    if axis is None:
        if x.shape is None:
            return TensorStructInfo(None, x.dtype)   # NumPy's meaning at run time (static_unit_dims)
        return TensorStructInfo([d for d in x.shape if not E.is_const_int(d, 1)], x.dtype)
    drop = set(normalize_axes(ctx, call, axis, x.ndim, x))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim - len(drop))
    for a in sorted(drop):
        if prove_not_equal(ctx, x.shape[a], one):
            ctx.error(f"relax.squeeze: dimension {a} of {format_sinfo(x)} is not 1")
    return TensorStructInfo([d for i, d in enumerate(x.shape) if i not in drop], x.dtype)


register_op("relax.permute_dims", _infer_permute_dims,
            lambda x, axes=None: np.transpose(x, axes), attr_names=("axes",),
            constructor=permute_dims)
register_op("relax.expand_dims", _infer_expand_dims,
            lambda x, axis: np.expand_dims(x, axis), attr_names=("axis",), constructor=expand_dims)
def static_unit_dims(call):
    """The axes a squeeze drops: its ``axis``; without one, the dims of the input's annotation
    that are the literal 1 (TVM's meaning: topi drops only dims statically 1, so ``(n, 1, m)``
    at n = 1 stays ``(1, m)``); None (every dim of length 1, NumPy's meaning) where the
    input's shape is not known. A symbolic dim that is 1 at run time is kept on every level."""
    axis = call.attrs.get("axis")
    if axis is not None:
        return axis
    sinfo = call.args[0].struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        return None
    return tuple(i for i, d in enumerate(sinfo.shape) if E.is_const_int(d, 1))


register_op("relax.squeeze", _infer_squeeze, lambda x, axis=None: np.squeeze(x, axis),
            attr_names=("axis",), constructor=squeeze,
            reference_attrs=lambda call: {**call.attrs, "axis": static_unit_dims(call)})


# ---------------------------------------------------------------- broadcast_to / repeat / tile
def broadcast_to(x, shape):
    """R.broadcast_to(x, shape): NumPy broadcast of x to ``shape``."""
    return make_call("relax.broadcast_to", [as_tensor(x), as_shape(shape)])


def _infer_broadcast_to(call, ctx) -> TensorStructInfo:
    x, target = tensor_arg(call, 0, ctx), shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    if x.ndim > len(target.values):
        ctx.error(f"relax.broadcast_to: cannot broadcast {format_sinfo(x)} to fewer dims "
                  f"{format_sinfo(target)}")
    if x.shape is not None:
        offset = len(target.values) - x.ndim
        one = E.IntImm(1)
        for i, d in enumerate(x.shape):
            want = target.values[offset + i]
            # Provably wrong only when d is neither 1 nor the target dim.
            if prove_not_equal(ctx, d, one) and prove_not_equal(ctx, d, want):
                ctx.error(f"relax.broadcast_to: cannot broadcast {format_sinfo(x)} to "
                          f"{format_sinfo(target)}: dimension {i} is {format_dim(d)}")
    return TensorStructInfo(simplify_shape(ctx, target.values), x.dtype)


def repeat(x, repeats: int, axis=None):
    """R.repeat(x, repeats, axis=None): repeat each element; flattens first when axis is None."""
    repeats = attr_int(repeats, "repeat", "repeats")
    if repeats < 0:
        raise OpAttributeError(f"R.repeat: repeats must be non-negative, got {repeats}")
    if axis is not None:
        axis = attr_int(axis, "repeat", "axis")
    return make_call("relax.repeat", [as_tensor(x)], {"repeats": repeats, "axis": axis})


def _infer_repeat(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    repeats, axis = call.attrs["repeats"], call.attrs.get("axis")
    if axis is None:
        if x.shape is None:
            return TensorStructInfo(None, x.dtype, 1)
        return TensorStructInfo([simplify(ctx, product(x.shape) * repeats)], x.dtype)
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    (axis,) = normalize_axes(ctx, call, [axis], x.ndim, x)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    dims[axis] = simplify(ctx, dims[axis] * repeats)
    return TensorStructInfo(dims, x.dtype)


def tile(x, repeats):
    """R.tile(x, repeats): NumPy tile (shorter of shape/repeats is padded with 1s on the left)."""
    reps = attr_axes(repeats, "tile", "repeats")
    if reps is None or any(r < 0 for r in reps):
        raise OpAttributeError(f"R.tile: repeats must be non-negative ints, got {repeats!r}")
    return make_call("relax.tile", [as_tensor(x)], {"repeats": reps})


def _infer_tile(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    reps = call.attrs["repeats"]
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    out_ndim = max(x.ndim, len(reps))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    dims = [E.IntImm(1)] * (out_ndim - x.ndim) + list(x.shape)
    reps = (1,) * (out_ndim - len(reps)) + tuple(reps)
    return TensorStructInfo([simplify(ctx, d * r) for d, r in zip(dims, reps)], x.dtype)


register_op("relax.broadcast_to", _infer_broadcast_to,
            lambda x, shape: np.broadcast_to(x, tuple(shape)).copy(), constructor=broadcast_to)
register_op("relax.repeat", _infer_repeat, lambda x, repeats, axis=None: np.repeat(x, repeats, axis),
            attr_names=("repeats", "axis"), constructor=repeat)
register_op("relax.tile", _infer_tile, lambda x, repeats: np.tile(x, repeats),
            attr_names=("repeats",), constructor=tile)

__all__ = ["reshape", "flatten", "permute_dims", "expand_dims", "squeeze", "static_unit_dims", "broadcast_to",
           "repeat", "tile"]
