"""``R.nn.max_pool2d`` / ``avg_pool2d`` / ``adaptive_avg_pool2d`` in TVM's
default ``NCHW`` layout.

Padded positions never win a max (they read as -inf). An average divides by
the window positions inside the input, or with ``count_include_pad`` inside
the padded input (never the ``ceil_mode`` overhang), as PyTorch does.
Adaptive pooling gives output row ``i`` the input rows
``floor(i * H / OH) .. ceil((i + 1) * H / OH)``.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import format_sinfo, tensor_arg
from ._window import (attr_layout, attr_padding, attr_per_axis, numpy_output_dims, numpy_window,
                      relayout,
                      window_output_shape)
from .registry import OpAttributeError, register_op


def _pool_attrs(op: str, pool_size, strides, padding, dilation, ceil_mode, count_include_pad,
                layout, out_layout, ndim: int = 2) -> dict:
    for name, flag in (("ceil_mode", ceil_mode), ("count_include_pad", count_include_pad)):
        if not isinstance(flag, (bool, np.bool_)):
            raise OpAttributeError(f"R.{op}: {name} must be a bool, got {flag!r}")
    return {
        "pool_size": attr_per_axis(pool_size, ndim, op, "pool_size", 1),
        "strides": attr_per_axis(strides, ndim, op, "strides", 1),
        "padding": attr_padding(padding, ndim, op),
        "dilation": attr_per_axis(dilation, ndim, op, "dilation", 1),
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "layout": attr_layout(None, _LAYOUT[ndim], op, "layout"),
        "out_layout": attr_layout(None, _LAYOUT[ndim], op, "out_layout"),
    }


_LAYOUT = {2: "NCHW", 3: "NCDHW"}


def _in_layout(op: str, build, data, layout, out_layout, ndim: int = 2):
    """Other layouts than NCHW (NHWC...) are transposes around the NCHW pool; the output
    layout defaults to the input's, as in TVM."""
    return relayout(op, build, [(as_tensor(data), layout, _LAYOUT[ndim], "layout")],
                    layout if out_layout is None else out_layout, _LAYOUT[ndim])


def max_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), dilation=(1, 1),
               ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout=None):
    """R.nn.max_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), ...)."""
    attrs = _pool_attrs("nn.max_pool2d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout)
    return _in_layout("nn.max_pool2d", lambda d: make_call("relax.nn.max_pool2d", [d], attrs), data,
                      layout, out_layout)


def avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), dilation=(1, 1),
               ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout=None):
    """R.nn.avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), ...)."""
    attrs = _pool_attrs("nn.avg_pool2d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout)
    return _in_layout("nn.avg_pool2d", lambda d: make_call("relax.nn.avg_pool2d", [d], attrs), data,
                      layout, out_layout)


def _pool_ndim(call) -> int:
    """Spatial dims of a pool op: 3 for the ``*3d`` ops, else 2."""
    return 3 if call.op.name.endswith("3d") else 2


def _pooled_input(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    ndim = _pool_ndim(call) + 2
    if data.ndim >= 0 and data.ndim != ndim:
        ctx.error(f"{call.op.name}: data must have {ndim} dims ({_LAYOUT[ndim - 2]}), got "
                  f"{format_sinfo(data)}")
    if not call.op.name.startswith("relax.nn.max_pool") and data.dtype is not None \
            and not dt.is_float(data.dtype):
        ctx.error(f"{call.op.name} requires a floating-point tensor, got {format_sinfo(data)}")
    return data


def _infer_pool(call, ctx) -> TensorStructInfo:
    data = _pooled_input(call, ctx)
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, _pool_ndim(call) + 2)
    a = call.attrs
    spatial = window_output_shape(ctx, data.shape[2:], a["pool_size"], a["strides"], a["dilation"],
                                  a["padding"], a["ceil_mode"])
    return TensorStructInfo([*data.shape[:2], *spatial], data.dtype)


def _windows(data, pool_size, strides, padding, dilation, ceil_mode, fill):
    """Yield, per kernel offset, the window elements and whether each is inside the input
    (and inside the padded input)."""
    out_dims = numpy_output_dims(data.shape[2:], pool_size, strides, dilation, padding, ceil_mode)
    nd = len(pool_size)
    # enough high padding for the ceil_mode overhang
    extra = [max(0, (n - 1) * s + (k - 1) * d + 1 - (size + lo + hi))
             for n, s, k, d, size, lo, hi in zip(out_dims, strides, pool_size, dilation,
                                                  data.shape[2:], padding[:nd], padding[nd:])]
    pads = [(0, 0), (0, 0)] + [(padding[i], padding[nd + i] + extra[i]) for i in range(nd)]
    padded = np.pad(data, pads, constant_values=fill)
    inside = np.pad(np.ones(data.shape[2:], bool), pads[2:])
    in_padded = np.pad(np.ones([s + lo + hi for s, lo, hi in zip(data.shape[2:], padding[:nd],
                                                                   padding[nd:])], bool),
                       [(0, e) for e in extra])
    for offsets in np.ndindex(*pool_size):
        yield (numpy_window(padded, offsets, strides, dilation, out_dims),
               numpy_window(inside, offsets, strides, dilation, out_dims),
               numpy_window(in_padded, offsets, strides, dilation, out_dims))


def _max_pool_reference(data, pool_size, strides, padding, dilation, ceil_mode=False, **_):
    lowest = -np.inf if dt.is_float(data.dtype.name) else np.iinfo(data.dtype).min
    out = None
    for window, _inside, _in_padded in _windows(data, pool_size, strides, padding, dilation,
                                                ceil_mode, lowest):
        out = window.copy() if out is None else np.maximum(out, window)
    return np.asarray(out, dtype=data.dtype)


def _avg_pool_reference(data, pool_size, strides, padding, dilation, ceil_mode=False,
                        count_include_pad=False, **_):
    total = count = None
    for window, inside, in_padded in _windows(data, pool_size, strides, padding, dilation,
                                              ceil_mode, 0):
        counted = (in_padded if count_include_pad else inside).astype(data.dtype)
        total = window.copy() if total is None else total + window
        count = counted.copy() if count is None else count + counted
    with np.errstate(invalid="ignore", divide="ignore"):  # an all-padding window: 0 / 0
        return np.asarray(total / count, dtype=data.dtype)


_POOL_ATTRS = ("pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad",
               "layout", "out_layout")
register_op("relax.nn.max_pool2d", _infer_pool, _max_pool_reference, attr_names=_POOL_ATTRS,
            constructor=max_pool2d)
register_op("relax.nn.avg_pool2d", _infer_pool, _avg_pool_reference, attr_names=_POOL_ATTRS,
            constructor=avg_pool2d)


# ---------------------------------------------------------------- adaptive_avg_pool2d
def adaptive_avg_pool2d(data, output_size=None, layout="NCHW", out_layout=None):
    """R.nn.adaptive_avg_pool2d(data, output_size=None, layout="NCHW", out_layout=None)."""
    op = "nn.adaptive_avg_pool2d"
    if output_size is not None:
        output_size = attr_per_axis(output_size, 2, op, "output_size", 1)
    attrs = {"output_size": output_size, "layout": "NCHW", "out_layout": "NCHW"}
    return _in_layout(op, lambda d: make_call("relax.nn.adaptive_avg_pool2d", [d], attrs), data,
                      layout, out_layout)


def _infer_adaptive(call, ctx) -> TensorStructInfo:
    data = _pooled_input(call, ctx)
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, _pool_ndim(call) + 2)
    size = call.attrs["output_size"]
    return TensorStructInfo([*data.shape[:2], *(size or data.shape[2:])], data.dtype)


def adaptive_bounds(i: int, size: int, out: int) -> tuple[int, int]:
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_reference(data, output_size=None, **_):
    out_dims = tuple(output_size or data.shape[2:])
    sizes = data.shape[2:]
    out = np.empty((*data.shape[:2], *out_dims), dtype=data.dtype)
    axes = tuple(range(2, data.ndim))
    for pos in np.ndindex(*out_dims):
        window = tuple(slice(*adaptive_bounds(i, n, m)) for i, n, m in zip(pos, sizes, out_dims))
        with np.errstate(invalid="ignore"):  # an empty input: mean of nothing
            out[(slice(None), slice(None), *pos)] = data[(slice(None), slice(None), *window)].mean(
                axis=axes)
    return out


register_op("relax.nn.adaptive_avg_pool2d", _infer_adaptive, _adaptive_reference,
            attr_names=("output_size", "layout", "out_layout"), constructor=adaptive_avg_pool2d)



# ---------------------------------------------------------------- 3-D pools (NCDHW)
def max_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0, 0, 0),
               dilation=(1, 1, 1), ceil_mode=False, count_include_pad=False, layout="NCDHW",
               out_layout=None):
    """R.nn.max_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0, 0, 0), ...)."""
    attrs = _pool_attrs("nn.max_pool3d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout, 3)
    return _in_layout("nn.max_pool3d", lambda d: make_call("relax.nn.max_pool3d", [d], attrs),
                      data, layout, out_layout, 3)


def avg_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0, 0, 0),
               dilation=(1, 1, 1), ceil_mode=False, count_include_pad=False, layout="NCDHW",
               out_layout=None):
    """R.nn.avg_pool3d(data, pool_size=(1, 1, 1), strides=(1, 1, 1), padding=(0, 0, 0), ...)."""
    attrs = _pool_attrs("nn.avg_pool3d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout, 3)
    return _in_layout("nn.avg_pool3d", lambda d: make_call("relax.nn.avg_pool3d", [d], attrs),
                      data, layout, out_layout, 3)


def adaptive_avg_pool3d(data, output_size=None, layout="NCDHW", out_layout=None):
    """R.nn.adaptive_avg_pool3d(data, output_size=None, layout="NCDHW", out_layout=None)."""
    op = "nn.adaptive_avg_pool3d"
    if output_size is not None:
        output_size = attr_per_axis(output_size, 3, op, "output_size", 1)
    attrs = {"output_size": output_size, "layout": "NCDHW", "out_layout": "NCDHW"}
    return _in_layout(op, lambda d: make_call("relax.nn.adaptive_avg_pool3d", [d], attrs), data,
                      layout, out_layout, 3)


register_op("relax.nn.max_pool3d", _infer_pool, _max_pool_reference, attr_names=_POOL_ATTRS,
            constructor=max_pool3d)
register_op("relax.nn.avg_pool3d", _infer_pool, _avg_pool_reference, attr_names=_POOL_ATTRS,
            constructor=avg_pool3d)
register_op("relax.nn.adaptive_avg_pool3d", _infer_adaptive, _adaptive_reference,
            attr_names=("output_size", "layout", "out_layout"), constructor=adaptive_avg_pool3d)

__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool3d", "avg_pool3d",
           "adaptive_avg_pool3d"]


# ---------------------------------------------------------------- 1-D pools
def _pool1d(op: str, pool2d, data, pool_size, strides, padding, dilation, ceil_mode,
            count_include_pad, layout, out_layout):
    """A 1-D pool is the 2-D pool of a height-1 image (``expand_dims`` at axis 2, ``squeeze``
    after), which the normalizer binds one by one; only the NCW layout is taken."""
    from ._window import attr_padding, attr_per_axis
    from .manipulate import expand_dims, squeeze
    for name, given in (("layout", layout), ("out_layout", out_layout or "NCW")):
        if given != "NCW":
            raise OpAttributeError(f"R.{op}: {name} {given!r} is not supported; use \"NCW\" "
                                   "(R.permute_dims around the call)")
    (size,) = attr_per_axis(pool_size, 1, op, "pool_size", 1)
    (stride,) = attr_per_axis(strides, 1, op, "strides", 1)
    (dil,) = attr_per_axis(dilation, 1, op, "dilation", 1)
    lo, hi = attr_padding(padding, 1, op)
    out = pool2d(expand_dims(as_tensor(data), [2]), (1, size), (1, stride), (0, lo, 0, hi),
                 (1, dil), ceil_mode, count_include_pad)
    return squeeze(out, [2])


def max_pool1d(data, pool_size=1, strides=1, padding=0, dilation=1, ceil_mode=False,
               count_include_pad=False, layout="NCW", out_layout=None):
    """R.nn.max_pool1d(data, pool_size=1, strides=1, padding=0, dilation=1, ...) (NCW)."""
    return _pool1d("nn.max_pool1d", max_pool2d, data, pool_size, strides, padding, dilation,
                   ceil_mode, count_include_pad, layout, out_layout)


def avg_pool1d(data, pool_size=1, strides=1, padding=0, dilation=1, ceil_mode=False,
               count_include_pad=False, layout="NCW", out_layout=None):
    """R.nn.avg_pool1d(data, pool_size=1, strides=1, padding=0, dilation=1, ...) (NCW)."""
    return _pool1d("nn.avg_pool1d", avg_pool2d, data, pool_size, strides, padding, dilation,
                   ceil_mode, count_include_pad, layout, out_layout)


def adaptive_avg_pool1d(data, output_size=None, layout="NCW", out_layout=None):
    """R.nn.adaptive_avg_pool1d(data, output_size=None, layout="NCW") (NCW)."""
    from .manipulate import expand_dims, squeeze
    op = "nn.adaptive_avg_pool1d"
    for name, given in (("layout", layout), ("out_layout", out_layout or "NCW")):
        if given != "NCW":
            raise OpAttributeError(f"R.{op}: {name} {given!r} is not supported; use \"NCW\"")
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != 1:
            raise OpAttributeError(f"R.{op}: output_size has one value, got {output_size!r}")
        output_size = output_size[0]
    size = None if output_size is None else (1, output_size)
    return squeeze(adaptive_avg_pool2d(expand_dims(as_tensor(data), [2]), size), [2])
