"""``R.cumsum(data, axis=None, dtype=None, exclusive=False)`` (TVM's signature):
running sums along ``axis``, over the flattened input when ``axis`` is None;
``exclusive`` leaves each element out of its own sum (the first is 0)."""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import attr_dtype, attr_int, normalize_axis, product, simplify, tensor_arg
from .registry import OpAttributeError, register_op


def cumsum(data, axis=None, dtype=None, exclusive=False):
    """R.cumsum(data, axis=None, dtype=None, exclusive=False)."""
    if not isinstance(exclusive, (bool, np.bool_)):
        raise OpAttributeError(f"R.cumsum: exclusive must be a bool, got {exclusive!r}")
    return make_call("relax.cumsum", [as_tensor(data)], {
        "axis": None if axis is None else attr_int(axis, "cumsum", "axis"),
        "dtype": None if dtype in (None, "void", "") else attr_dtype(dtype, "cumsum"),
        "exclusive": bool(exclusive)})


def _infer_cumsum(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    dtype = call.attrs["dtype"] or x.dtype
    if call.attrs["axis"] is None:
        if x.shape is None:
            return TensorStructInfo(None, dtype, 1)
        return TensorStructInfo([simplify(ctx, product(x.shape))], dtype)
    if x.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    return TensorStructInfo(x.shape, dtype, x.ndim)


def _cumsum_reference(data, axis=None, dtype=None, exclusive=False):
    dtype = dtype or data.dtype.name
    if axis is None:
        data, axis = data.reshape(-1), 0
    out = np.cumsum(data, axis=axis, dtype=dtype)
    if exclusive:  # shift by one along the axis, 0 first
        shifted = np.zeros_like(out)
        lead = (slice(None),) * axis
        shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
        out = shifted
    return np.asarray(out, dtype=dtype)


register_op("relax.cumsum", _infer_cumsum, _cumsum_reference,
            attr_names=("axis", "dtype", "exclusive"), constructor=cumsum)

__all__ = ["cumsum"]
