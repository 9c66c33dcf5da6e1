"""TVM's ``R.nn.pad(data, pad_width, pad_value=0.0, pad_mode="constant")``.

``pad_width`` lists a (before, after) pair per axis, flattened
(``[b0, a0, b1, a1, ...]``); a negative width crops. ``pad_mode`` is
``"constant"`` (``pad_value``), ``"edge"`` (the nearest element) or ``"reflect"``
(mirrored without repeating the edge, NumPy's ``reflect``). ``pad_value`` may be
written as a number, ``R.const(v)`` or ``R.prim_value(v)``: it is kept as a
number, converted to the data's dtype.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..expr import Constant, PrimValue
from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import attr_int, format_sinfo, prove_not_equal, simplify, tensor_arg
from .registry import OpAttributeError, register_op

PAD_MODES = ("constant", "edge", "reflect")


def _plain_number(value):
    if isinstance(value, Constant) and value.data.ndim == 0:
        return value.data.item()
    if isinstance(value, PrimValue) and isinstance(value.value, (E.IntImm, E.FloatImm)):
        return value.value.value
    return check_attr_number(value, "nn.pad", "pad_value")


def pad(data, pad_width, pad_value=0.0, pad_mode: str = "constant"):
    """R.nn.pad(data, pad_width, pad_value=0.0, pad_mode="constant")."""
    if pad_mode not in PAD_MODES:
        raise OpAttributeError(f"R.nn.pad: pad_mode must be one of {', '.join(PAD_MODES)}, "
                               f"got {pad_mode!r}")
    widths = []
    for w in pad_width if isinstance(pad_width, (list, tuple)) else [pad_width]:
        if isinstance(w, E.IntImm):
            w = w.value
        widths.append(attr_int(w, "nn.pad", "pad_width"))
    if len(widths) % 2:
        raise OpAttributeError(f"R.nn.pad: pad_width has a (before, after) pair per axis, got "
                               f"{len(widths)} values")
    if pad_mode != "constant" and any(w < 0 for w in widths):
        raise OpAttributeError(f"R.nn.pad: a negative width (a crop) needs pad_mode=\"constant\", "
                               f"got {pad_mode!r}")
    return make_call("relax.nn.pad", [as_tensor(data)], {
        "pad_width": tuple(widths), "pad_value": _plain_number(pad_value), "pad_mode": pad_mode})


def _infer_pad(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    widths = call.attrs["pad_width"]
    ndim = len(widths) // 2
    if x.ndim >= 0 and x.ndim != ndim:
        ctx.error(f"relax.nn.pad: pad_width has {ndim} (before, after) pairs, {format_sinfo(x)} "
                  f"has {x.ndim} dims")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, ndim)
    dims = []
    for d, before, after in zip(x.shape, widths[0::2], widths[1::2]):
        if call.attrs["pad_mode"] == "reflect" and (before or after) and \
                not prove_not_equal(ctx, d, E.IntImm(0)) and E.is_const_int(d, 0):
            ctx.error(f"relax.nn.pad: reflect padding of an empty axis of {format_sinfo(x)}")
        dims.append(simplify(ctx, d + before + after))
    return TensorStructInfo(dims, x.dtype)


def _pad_reference(data, pad_width, pad_value=0.0, pad_mode="constant"):
    pairs = list(zip(pad_width[0::2], pad_width[1::2]))
    # crop first (negative widths), then pad the rest
    crop = tuple(slice(max(-b, 0), data.shape[i] - max(-a, 0)) for i, (b, a) in enumerate(pairs))
    cropped = data[crop]
    grow = [(max(b, 0), max(a, 0)) for b, a in pairs]
    if pad_mode == "constant":
        value = np.asarray(pad_value).astype(data.dtype)
        return np.pad(cropped, grow, mode="constant", constant_values=value)
    return np.pad(cropped, grow, mode=pad_mode)


register_op("relax.nn.pad", _infer_pad, _pad_reference,
            attr_names=("pad_width", "pad_value", "pad_mode"), constructor=pad)

__all__ = ["pad"]
