"""``R.cumsum`` / ``R.cumprod(data, axis=None, dtype=None, exclusive=False)`` (TVM's
signatures): running sums (products) along ``axis``, over the flattened input when
``axis`` is None; ``exclusive`` leaves each element out of its own sum (the first is
the identity, 0 or 1)."""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import attr_dtype, attr_int, normalize_axis, product, simplify, tensor_arg
from .registry import OpAttributeError, register_op


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


def _make_cumulative(name: str, np_fn, identity: int):
    op_name = "relax." + name

    def constructor(data, axis=None, dtype=None, exclusive=False):
        if exclusive is None:  # TVM's printer writes exclusive=None for the default
            exclusive = False
        if not isinstance(exclusive, (bool, np.bool_)):
            raise OpAttributeError(f"R.{name}: exclusive must be a bool, got {exclusive!r}")
        return make_call(op_name, [as_tensor(data)], {
            "axis": None if axis is None else attr_int(axis, name, "axis"),
            "dtype": None if dtype in (None, "void", "") else attr_dtype(dtype, name),
            "exclusive": bool(exclusive)})

    def reference(data, axis=None, dtype=None, exclusive=False):
        dtype = dtype or data.dtype.name
        if axis is None:
            data, axis = data.reshape(-1), 0
        axis %= data.ndim   # the shift below indexes from the front
        out = np_fn(data, axis=axis, dtype=dtype)
        if exclusive:  # shift by one along the axis, the identity first
            shifted = np.full_like(out, identity)
            lead = (slice(None),) * axis
            shifted[lead + (slice(1, None),)] = out[lead + (slice(None, -1),)]
            out = shifted
        return np.asarray(out, dtype=dtype)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(data, axis=None, dtype=None, exclusive=False)."
    register_op(op_name, _infer_cumsum, reference, attr_names=("axis", "dtype", "exclusive"),
                constructor=constructor)
    return constructor


cumsum = _make_cumulative("cumsum", np.cumsum, 0)
cumprod = _make_cumulative("cumprod", np.cumprod, 1)

__all__ = ["cumsum", "cumprod"]
