"""``R.sort``, ``R.argsort`` and ``R.topk`` (TVM's signatures).

Orders are stable: equal elements keep their index order, in both
directions. NaN sorts as the largest value (last ascending, first
descending), as NumPy's sort does. ``topk`` with ``k < 1`` keeps the whole
axis; ``ret_type`` is ``"both"`` (a ``(values, indices)`` tuple),
``"values"`` or ``"indices"``; ``largest=False`` takes the smallest.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import TensorStructInfo, TupleStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import (attr_dtype, attr_int, const_value, format_sinfo, normalize_axis,
                          prove_equal, tensor_arg)
from .registry import OpAttributeError, register_op


def _attr_bool(value, op: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OpAttributeError(f"R.{op}: {name} must be a bool, got {value!r}")
    return bool(value)


def _index_dtype(value, op: str) -> str:
    dtype = attr_dtype(value, op)
    if not dt.is_int(dtype):
        raise OpAttributeError(f"R.{op}: dtype of the indices must be an integer type, got {dtype!r}")
    return dtype


def stable_order(data: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices that sort ``data`` along ``axis``, ties in index order both ways."""
    if not descending:
        return np.argsort(data, axis=axis, kind="stable")
    # a stable ascending sort of the reversed axis, read backwards, keeps ties in order
    size = data.shape[axis]
    backwards = np.argsort(np.flip(data, axis), axis=axis, kind="stable")
    return np.flip(size - 1 - backwards, axis)


# ---------------------------------------------------------------- sort
def sort(x, axis: int = -1, descending: bool = False):
    """R.sort(x, axis=-1, descending=False): the values in order along ``axis``."""
    return make_call("relax.sort", [as_tensor(x)], {
        "axis": attr_int(axis, "sort", "axis"),
        "descending": _attr_bool(descending, "sort", "descending")})


def _infer_sort(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "x")
    if x.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _sort_reference(x, axis=-1, descending=False):
    axis %= max(x.ndim, 1)
    return np.take_along_axis(x, stable_order(x, axis, descending), axis=axis)


register_op("relax.sort", _infer_sort, _sort_reference, attr_names=("axis", "descending"),
            constructor=sort)


# ---------------------------------------------------------------- argsort
def argsort(data, axis: int = -1, descending: bool = False, dtype: str = "int32"):
    """R.argsort(data, axis=-1, descending=False, dtype="int32")."""
    return make_call("relax.argsort", [as_tensor(data)], {
        "axis": attr_int(axis, "argsort", "axis"),
        "descending": _attr_bool(descending, "argsort", "descending"),
        "dtype": _index_dtype(dtype, "argsort")})


def _infer_argsort(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    if x.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    return TensorStructInfo(x.shape, call.attrs["dtype"], x.ndim)


def _argsort_reference(data, axis=-1, descending=False, dtype="int32"):
    return stable_order(data, axis % data.ndim, descending).astype(dtype)


register_op("relax.argsort", _infer_argsort, _argsort_reference,
            attr_names=("axis", "descending", "dtype"), constructor=argsort)


# ---------------------------------------------------------------- topk
RET_TYPES = ("both", "values", "indices")


def topk(data, k: int = 1, axis: int = -1, ret_type: str = "both", largest: bool = True,
         dtype: str = "int32"):
    """R.topk(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32")."""
    if ret_type not in RET_TYPES:
        raise OpAttributeError(f"R.topk: ret_type must be one of {', '.join(RET_TYPES)}, "
                               f"got {ret_type!r}")
    return make_call("relax.topk", [as_tensor(data)], {
        "k": attr_int(k, "topk", "k"), "axis": attr_int(axis, "topk", "axis"),
        "ret_type": ret_type, "largest": _attr_bool(largest, "topk", "largest"),
        "dtype": _index_dtype(dtype, "topk")})


def _infer_topk(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = call.attrs
    shape = None
    if x.ndim >= 0:
        axis = normalize_axis(ctx, call, a["axis"], x.ndim, x)
        if x.shape is not None:
            shape = list(x.shape)
            if a["k"] >= 1:
                size = const_value(x.shape[axis])
                if size is not None and size < a["k"]:
                    ctx.error(f"relax.topk: k={a['k']} is larger than axis {a['axis']} of "
                              f"{format_sinfo(x)}")
                if not prove_equal(ctx, x.shape[axis], a["k"]):
                    shape[axis] = E.IntImm(a["k"])
    values = TensorStructInfo(shape, x.dtype, x.ndim)
    indices = TensorStructInfo(shape, a["dtype"], x.ndim)
    return {"both": TupleStructInfo([values, indices]), "values": values,
            "indices": indices}[a["ret_type"]]


def _topk_reference(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32"):
    axis %= data.ndim
    size = data.shape[axis]
    if k >= 1 and k > size:
        raise ValueError(f"topk: k={k} is larger than the axis length {size}")
    order = stable_order(data, axis, largest)
    if k >= 1:
        order = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(data, order, axis=axis)
    indices = order.astype(dtype)
    return {"both": (values, indices), "values": values, "indices": indices}[ret_type]


register_op("relax.topk", _infer_topk, _topk_reference,
            attr_names=("k", "axis", "ret_type", "largest", "dtype"), constructor=topk)

__all__ = ["sort", "argsort", "topk"]


# ---------------------------------------------------------------- median
def median(x, axis=None, keepdims: bool = False):
    """R.median(x, axis=None, keepdims=False): the lower median (element ``(n - 1) // 2`` of
    the stable ascending order, as ``torch.median``; NaN sorts last). Along one axis
    (``axis=1`` or ``axis=[1]``) it is a ``(values, indices)`` tuple, the indices int64
    positions along that axis; with ``axis=None`` it is the median of all elements, a
    tensor."""
    if axis is not None:
        items = (axis,) if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) \
            else None
        if items is None:
            try:
                items = tuple(axis)
            except TypeError:
                items = ()
        if len(items) != 1:
            raise OpAttributeError(f"R.median: axis must be None or a single axis, got {axis!r}")
        axis = attr_int(items[0], "median", "axis")
    return make_call("relax.median", [as_tensor(x)], {
        "axis": axis, "keepdims": _attr_bool(keepdims, "median", "keepdims")})


def _infer_median(call, ctx):
    x = tensor_arg(call, 0, ctx, "x")
    axis, keepdims = call.attrs["axis"], call.attrs["keepdims"]
    if axis is None:
        ndim = x.ndim if keepdims else 0
        shape = None if ndim < 0 else [E.IntImm(1)] * ndim
        if x.shape is not None and any(const_value(s) == 0 for s in x.shape):
            ctx.error(f"relax.median: {format_sinfo(x)} has no elements")
        return TensorStructInfo(shape, x.dtype, ndim)
    shape, ndim = None, -1
    if x.ndim >= 0:
        a = normalize_axis(ctx, call, axis, x.ndim, x)
        ndim = x.ndim if keepdims else x.ndim - 1
        if x.shape is not None:
            if const_value(x.shape[a]) == 0:
                ctx.error(f"relax.median: axis {axis} of {format_sinfo(x)} is empty")
            shape = list(x.shape)
            if keepdims:
                shape[a] = E.IntImm(1)
            else:
                del shape[a]
    return TupleStructInfo([TensorStructInfo(shape, x.dtype, ndim),
                            TensorStructInfo(shape, "int64", ndim)])


def _median_reference(x, axis=None, keepdims=False):
    if axis is None:
        flat = x.reshape(-1)
        if flat.size == 0:
            raise ValueError("median: the tensor has no elements")
        value = flat[stable_order(flat, 0, False)[(flat.size - 1) // 2]]
        return np.full((1,) * x.ndim if keepdims else (), value, dtype=x.dtype)
    axis %= x.ndim
    size = x.shape[axis]
    if size == 0:
        raise ValueError(f"median: axis {axis} is empty")
    pick = np.take(stable_order(x, axis, False), [(size - 1) // 2], axis=axis)
    values = np.take_along_axis(x, pick, axis=axis)
    if not keepdims:
        values, pick = np.squeeze(values, axis), np.squeeze(pick, axis)
    return np.ascontiguousarray(values), np.ascontiguousarray(pick.astype("int64"))


register_op("relax.median", _infer_median, _median_reference, attr_names=("axis", "keepdims"),
            constructor=median)

__all__ += ["median"]
