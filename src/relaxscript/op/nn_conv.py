"""``R.nn.conv1d`` / ``R.nn.conv2d``: grouped, strided, dilated, zero-padded
convolutions in TVM's default layouts (``NCW``/``OIW``, ``NCHW``/``OIHW``).

The weight's second dim is ``in_channels / groups``; ``groups`` must divide
both channel counts. Operands share a dtype; ``out_dtype`` (TVM prints
``"void"`` for none) gives the dtype the products are accumulated in.
"""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import (attr_dtype, attr_int, format_sinfo, prove_not_equal, same_dtype,
                          simplify, tensor_arg)
from ._window import (attr_layout, attr_padding, attr_per_axis, numpy_output_dims, numpy_window,
                      relayout, window_output_shape)
from .registry import OpAttributeError, register_op

_LAYOUTS = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


def _conv_attrs(op: str, ndim: int, strides, padding, dilation, groups, data_layout,
                kernel_layout, out_layout, out_dtype) -> dict:
    data_default, kernel_default = _LAYOUTS[ndim]
    groups = attr_int(groups, op, "groups")
    if groups < 1:
        raise OpAttributeError(f"R.{op}: groups must be at least 1, got {groups}")
    if out_dtype in (None, "void", ""):
        out_dtype = None
    else:
        out_dtype = attr_dtype(out_dtype, op, "out_dtype")
    return {
        "strides": attr_per_axis(strides, ndim, op, "strides", 1),
        "padding": attr_padding(padding, ndim, op),
        "dilation": attr_per_axis(dilation, ndim, op, "dilation", 1),
        "groups": groups,
        "data_layout": attr_layout(data_layout, data_default, op, "data_layout"),
        "kernel_layout": attr_layout(kernel_layout, kernel_default, op, "kernel_layout"),
        "out_layout": attr_layout(out_layout, data_default, op, "out_layout"),
        "out_dtype": out_dtype,
    }


def _conv(ndim: int, data, weight, strides, padding, dilation, groups, data_layout, kernel_layout,
          out_layout, out_dtype, kernel_default=None):
    """A convolution in any permuted layouts: the default-layout op between transposes
    (``out_layout`` defaults to ``data_layout``, as in TVM)."""
    op = {1: "nn.conv1d", 2: "nn.conv2d", 3: "nn.conv3d"}[ndim] if kernel_default is None \
        else "nn.conv2d_transpose"
    data_default, kernel_standard = _LAYOUTS[ndim]
    kernel_default = kernel_default or kernel_standard
    out_layout = data_layout if out_layout is None else out_layout
    attrs = _conv_attrs(op, ndim, strides, padding, dilation, groups, None, None, None, out_dtype)
    return relayout(op, lambda d, w: make_call("relax." + op, [d, w], attrs),
                    [(as_tensor(data), data_layout, data_default, "data_layout"),
                     (as_tensor(weight), kernel_layout, kernel_default, "kernel_layout")],
                    out_layout, data_default), attrs


def conv1d(data, weight, strides=1, padding=0, dilation=1, groups=1, data_layout="NCW",
           kernel_layout="OIW", out_layout=None, out_dtype=None):
    """R.nn.conv1d(data, weight, strides=1, padding=0, dilation=1, groups=1, ...); other
    layouts than NCW/OIW become transposes around the NCW/OIW convolution."""
    return _conv(1, data, weight, strides, padding, dilation, groups, data_layout, kernel_layout,
                 out_layout, out_dtype)[0]


def conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
           data_layout="NCHW", kernel_layout="OIHW", out_layout=None, out_dtype=None):
    """R.nn.conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, ...);
    other layouts than NCHW/OIHW (NHWC, HWIO, OHWI...) become transposes around the
    NCHW/OIHW convolution."""
    return _conv(2, data, weight, strides, padding, dilation, groups, data_layout, kernel_layout,
                 out_layout, out_dtype)[0]


def conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1,
           data_layout="NCDHW", kernel_layout="OIDHW", out_layout=None, out_dtype=None):
    """R.nn.conv3d(data, weight, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1),
    groups=1, ...): the same direct convolution over three spatial axes."""
    return _conv(3, data, weight, strides, padding, dilation, groups, data_layout, kernel_layout,
                 out_layout, out_dtype)[0]


def _infer_conv(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    weight = tensor_arg(call, 1, ctx, "weight")
    attrs = call.attrs
    out_dtype = attrs["out_dtype"] or same_dtype(ctx, call, [data, weight])
    ndim = len(attrs["strides"]) + 2
    for what, sinfo in (("data", data), ("weight", weight)):
        if sinfo.ndim >= 0 and sinfo.ndim != ndim:
            ctx.error(f"{call.op.name}: {what} must have {ndim} dims "
                      f"({attrs['data_layout'] if what == 'data' else attrs['kernel_layout']}), "
                      f"got {format_sinfo(sinfo)}")
    if data.shape is None or weight.shape is None:
        return TensorStructInfo(None, out_dtype, ndim)
    groups = attrs["groups"]
    channels, out_channels = data.shape[1], weight.shape[0]
    per_group = simplify(ctx, weight.shape[1] * groups)
    if prove_not_equal(ctx, per_group, channels):
        ctx.error(f"{call.op.name}: data has {channels} channels but weight {format_sinfo(weight)} "
                  f"with groups={groups} expects {per_group}")
    if groups > 1 and prove_not_equal(ctx, out_channels % groups, 0):
        ctx.error(f"{call.op.name}: groups={groups} must divide the output channels of weight "
                  f"{format_sinfo(weight)}")
    spatial = window_output_shape(ctx, data.shape[2:], weight.shape[2:], attrs["strides"],
                                  attrs["dilation"], attrs["padding"])
    return TensorStructInfo([data.shape[0], out_channels, *spatial], out_dtype)


def conv_reference(data, weight, strides, padding, dilation, groups=1, out_dtype=None, **_layouts):
    """Direct convolution: one batched product per kernel offset."""
    d = len(strides)
    dtype = out_dtype or data.dtype.name
    batch, channels = data.shape[:2]
    out_channels, per_group = weight.shape[:2]
    if per_group * groups != channels:
        raise ValueError(f"conv: data has {channels} channels, weight expects {per_group * groups}")
    out_dims = numpy_output_dims(data.shape[2:], weight.shape[2:], strides, dilation, padding)
    pads = [(0, 0), (0, 0)] + [(padding[i], padding[d + i]) for i in range(d)]
    padded = np.pad(data.astype(dtype), pads)
    out = np.zeros((batch, groups, out_channels // groups, *out_dims), dtype=dtype)
    grouped_weight = weight.astype(dtype).reshape(groups, out_channels // groups, per_group,
                                                  *weight.shape[2:])
    for offsets in np.ndindex(*weight.shape[2:]):
        patch = numpy_window(padded, offsets, strides, dilation, out_dims)
        patch = patch.reshape(batch, groups, per_group, *out_dims)
        taps = grouped_weight[(slice(None),) * 3 + offsets]
        out += np.einsum("ngc...,goc->ngo...", patch, taps).astype(dtype)
    return out.reshape(batch, out_channels, *out_dims)


_ATTRS = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_layout",
          "out_dtype")
register_op("relax.nn.conv1d", _infer_conv, conv_reference, attr_names=_ATTRS, constructor=conv1d)
register_op("relax.nn.conv2d", _infer_conv, conv_reference, attr_names=_ATTRS, constructor=conv2d)
register_op("relax.nn.conv3d", _infer_conv, conv_reference, attr_names=_ATTRS, constructor=conv3d)

__all__ = ["conv1d", "conv2d", "conv3d"]


# ---------------------------------------------------------------- conv2d/3d_transpose
_TRANSPOSE_LAYOUTS = {2: ("NCHW", "IOHW"), 3: ("NCDHW", "IODHW")}


def _conv_transpose(ndim: int, data, weight, strides, padding, output_padding, dilation, groups,
                    data_layout, kernel_layout, out_layout, out_dtype):
    op = f"nn.conv{ndim}d_transpose"
    data_default, kernel_default = _TRANSPOSE_LAYOUTS[ndim]
    attrs = _conv_attrs(op, ndim, strides, padding, dilation, groups, None, None, None, out_dtype)
    attrs["data_layout"] = attr_layout(None, data_default, op, "data_layout")
    attrs["kernel_layout"] = attr_layout(None, kernel_default, op, "kernel_layout")
    attrs["out_layout"] = attr_layout(None, data_default, op, "out_layout")
    extra = attr_per_axis(output_padding, ndim, op, "output_padding", 0)
    for e, s, d in zip(extra, attrs["strides"], attrs["dilation"]):
        if e >= max(s, d):
            raise OpAttributeError(f"R.{op}: output_padding {extra} must be smaller than the "
                                   f"stride or the dilation")
    attrs = {"strides": attrs["strides"], "padding": attrs["padding"], "output_padding": extra,
             **{k: v for k, v in attrs.items() if k not in ("strides", "padding")}}
    out_layout = data_layout if out_layout is None else out_layout
    return relayout(op, lambda d, w: make_call("relax." + op, [d, w], attrs),
                    [(as_tensor(data), data_layout, data_default, "data_layout"),
                     (as_tensor(weight), kernel_layout, kernel_default, "kernel_layout")],
                    out_layout, data_default)


def conv2d_transpose(data, weight, strides=(1, 1), padding=(0, 0), output_padding=(0, 0),
                     dilation=(1, 1), groups=1, data_layout="NCHW", kernel_layout="IOHW",
                     out_layout=None, out_dtype=None):
    """R.nn.conv2d_transpose(data, weight, strides=(1, 1), padding=(0, 0), output_padding=(0, 0),
    dilation=(1, 1), groups=1, ...): the gradient of conv2d with respect to its input; the
    weight is ``(in_channels, out_channels / groups, kh, kw)`` (``IOHW``)."""
    return _conv_transpose(2, data, weight, strides, padding, output_padding, dilation, groups,
                           data_layout, kernel_layout, out_layout, out_dtype)


def conv3d_transpose(data, weight, strides=(1, 1, 1), padding=(0, 0, 0),
                     output_padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, data_layout="NCDHW",
                     kernel_layout="IODHW", out_layout=None, out_dtype=None):
    """R.nn.conv3d_transpose(...): conv2d_transpose over three spatial axes; the weight is
    ``(in_channels, out_channels / groups, kd, kh, kw)`` (``IODHW``); other layouts (``NDHWC``,
    ``DHWOI``...) become transposes around the NCDHW/IODHW op."""
    return _conv_transpose(3, data, weight, strides, padding, output_padding, dilation, groups,
                           data_layout, kernel_layout, out_layout, out_dtype)


def transposed_output_dim(size, kernel, stride, dilation, pad_lo, pad_hi, extra):
    return (size - 1) * stride - pad_lo - pad_hi + dilation * (kernel - 1) + extra + 1


def _infer_conv_transpose(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    weight = tensor_arg(call, 1, ctx, "weight")
    a = call.attrs
    d = len(a["strides"])
    out_dtype = a["out_dtype"] or same_dtype(ctx, call, [data, weight])
    data_layout, kernel_layout = _TRANSPOSE_LAYOUTS[d]
    for what, sinfo, layout in (("data", data, data_layout), ("weight", weight, kernel_layout)):
        if sinfo.ndim >= 0 and sinfo.ndim != d + 2:
            ctx.error(f"{call.op.name}: {what} must have {d + 2} dims ({layout}), "
                      f"got {format_sinfo(sinfo)}")
    if data.shape is None or weight.shape is None:
        return TensorStructInfo(None, out_dtype, d + 2)
    if prove_not_equal(ctx, weight.shape[0], data.shape[1]):
        ctx.error(f"{call.op.name}: data has {data.shape[1]} channels but weight "
                  f"{format_sinfo(weight)} expects {weight.shape[0]} ({kernel_layout})")
    if a["groups"] > 1 and prove_not_equal(ctx, data.shape[1] % a["groups"], 0):
        ctx.error(f"{call.op.name}: groups={a['groups']} must divide the input channels of "
                  f"{format_sinfo(data)}")
    p = a["padding"]
    spatial = [simplify(ctx, transposed_output_dim(data.shape[2 + i], weight.shape[2 + i],
                                                   a["strides"][i], a["dilation"][i], p[i], p[d + i],
                                                   a["output_padding"][i])) for i in range(d)]
    return TensorStructInfo([data.shape[0], simplify(ctx, weight.shape[1] * a["groups"]), *spatial],
                            out_dtype)


def _conv_transpose_reference(data, weight, strides, padding, output_padding, dilation, groups=1,
                              out_dtype=None, **_layouts):
    """Scatter form: input position ``t`` with tap ``k`` adds to output ``t * s + k * dl``
    (before the leading padding is cut off)."""
    dtype = out_dtype or data.dtype.name
    d = len(strides)
    batch, channels = data.shape[:2]
    spatial, kernel = data.shape[2:], weight.shape[2:]
    per_group_out = weight.shape[1]
    in_group = channels // groups
    full = [(spatial[i] - 1) * strides[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i]
            for i in range(d)]
    out = np.zeros((batch, groups, per_group_out, *full), dtype=dtype)
    grouped = data.astype(dtype).reshape(batch, groups, in_group, *spatial)
    taps = weight.astype(dtype).reshape(groups, in_group, per_group_out, *kernel)
    for offsets in np.ndindex(*kernel):
        contribution = np.einsum("ngc...,gco->ngo...", grouped,
                                 taps[(slice(None),) * 3 + offsets]).astype(dtype)
        window = tuple(slice(k * dl, k * dl + (n - 1) * s + 1, s)
                       for k, dl, s, n in zip(offsets, dilation, strides, spatial))
        out[(slice(None),) * 3 + window] += contribution
    sizes = [max(full[i] - padding[i] - padding[d + i], 0) for i in range(d)]
    out = out[(slice(None),) * 3 + tuple(slice(padding[i], padding[i] + sizes[i])
                                         for i in range(d))]
    return np.ascontiguousarray(out.reshape(batch, groups * per_group_out, *sizes))


_TRANSPOSE_ATTRS = ("strides", "padding", "output_padding", "dilation", "groups", "data_layout",
                    "kernel_layout", "out_layout", "out_dtype")
register_op("relax.nn.conv2d_transpose", _infer_conv_transpose, _conv_transpose_reference,
            attr_names=_TRANSPOSE_ATTRS, constructor=conv2d_transpose)
register_op("relax.nn.conv3d_transpose", _infer_conv_transpose, _conv_transpose_reference,
            attr_names=_TRANSPOSE_ATTRS, constructor=conv3d_transpose)

__all__ += ["conv2d_transpose", "conv3d_transpose"]


def conv1d_transpose(data, weight, strides=1, padding=0, output_padding=0, dilation=1, groups=1,
                     data_layout="NCW", kernel_layout="IOW", out_layout=None, out_dtype=None):
    """R.nn.conv1d_transpose(data, weight, strides=1, padding=0, output_padding=0, dilation=1,
    groups=1, data_layout="NCW", kernel_layout="IOW", out_layout=None, out_dtype=None).

    Not an operator of its own: ``conv2d_transpose`` of a height-1 image (``expand_dims``
    of data and weight at axis 2, ``squeeze`` after), which the normalizer binds one by one.
    Only the NCW/IOW layouts are taken (``R.permute_dims`` around it otherwise)."""
    from .manipulate import expand_dims, squeeze
    op = "nn.conv1d_transpose"
    for name, given, want in (("data_layout", data_layout, "NCW"), ("kernel_layout", kernel_layout, "IOW"),
                              ("out_layout", out_layout or "NCW", "NCW")):
        if given != want:
            raise OpAttributeError(f"R.{op}: {name} {given!r} is not supported; use {want!r} "
                                   "(R.permute_dims around the call)")
    (stride,) = attr_per_axis(strides, 1, op, "strides", 1)
    (dil,) = attr_per_axis(dilation, 1, op, "dilation", 1)
    (extra,) = attr_per_axis(output_padding, 1, op, "output_padding", 0)
    lo, hi = attr_padding(padding, 1, op)
    out = conv2d_transpose(expand_dims(as_tensor(data), [2]), expand_dims(as_tensor(weight), [2]),
                           strides=(1, stride), padding=(0, lo, 0, hi), output_padding=(0, extra),
                           dilation=(1, dil), groups=groups, out_dtype=out_dtype)
    return squeeze(out, [2])
