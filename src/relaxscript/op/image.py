"""TVM's ``R.image.resize2d(data, size, roi=None, layout="NCHW", method="linear",
coordinate_transformation_mode="half_pixel", rounding_method="round", cubic_alpha=-0.5,
cubic_exclude=0, extrapolation_value=0.0, out_dtype=None)``.

Each output position ``o`` of a resized axis (input length ``n``, output ``m``, scale
``n / m``) reads the input at the coordinate, in float32 as TVM computes it:

- ``half_pixel``: ``(o + 0.5) * n / m - 0.5``; ``pytorch_half_pixel``: the same, 0 when
  ``m == 1``; ``align_corners``: ``o * (n - 1) / (m - 1)`` (0 when ``m == 1``);
  ``asymmetric``: ``o * n / m``; ``tf_half_pixel_for_nn``: ``(o + 0.5) * n / m``.

``nearest_neighbor`` rounds that coordinate (``round``: half away from zero;
``round_prefer_floor``/``round_prefer_ceil``: ties down/up; ``floor``/``ceil`` with
TVM's 1e-5 slack) and clamps it into the axis; ``linear`` interpolates the two clamped
neighbours of each axis (``a * (1 - t) + b * t``). The result is cast to ``out_dtype``
(default: the data's; a cast to an integer type truncates). ``cubic``, the ROI mode
``tf_crop_and_resize`` and split layouts (``NCHW16c``) are refused by name.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo
from ._convert import as_shape, as_tensor, check_attr_number, make_call
from ._infer_util import attr_dtype, format_sinfo, shape_arg, tensor_arg
from .registry import OpAttributeError, register_op

METHODS = ("nearest_neighbor", "linear")
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_half_pixel_for_nn")
ROUNDING = ("round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "")


def _number(value, name):
    if isinstance(value, (E.IntImm, E.FloatImm)):
        value = value.value
    return float(check_attr_number(value, "image.resize2d", name))


def spatial_axes(layout: str) -> tuple[int, int]:
    """The H and W axes of a permutation of ``NCHW``."""
    if sorted(layout) != sorted("NCHW"):
        raise OpAttributeError(f"R.image.resize2d: layout {layout!r} is not supported; use a "
                               "permutation of NCHW (split layouts such as NCHW16c are not)")
    return layout.index("H"), layout.index("W")


def _resize_call(op: str, axes_of, dims: int, data, size, roi, layout, method, coordinate_transformation_mode,
                 rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype):
    """The checked call of ``R.image.<op>`` over ``dims`` spatial axes (``axes_of(layout)`` names them)."""
    if method == "cubic":
        raise OpAttributeError(f"R.image.{op}: method \"cubic\" is not supported; use "
                               "\"linear\" or \"nearest_neighbor\"")
    if method not in METHODS:
        raise OpAttributeError(f"R.image.{op}: method must be one of {', '.join(METHODS)}, "
                               f"got {method!r}")
    if coordinate_transformation_mode == "tf_crop_and_resize":
        raise OpAttributeError(f"R.image.{op}: coordinate_transformation_mode "
                               "\"tf_crop_and_resize\" (an ROI) is not supported")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise OpAttributeError(f"R.image.{op}: coordinate_transformation_mode must be one of "
                               f"{', '.join(COORDINATE_MODES)}, got {coordinate_transformation_mode!r}")
    if rounding_method not in ROUNDING:
        raise OpAttributeError(f"R.image.{op}: rounding_method must be one of "
                               f"{', '.join(r for r in ROUNDING if r)}, got {rounding_method!r}")
    if not isinstance(layout, str):
        raise OpAttributeError(f"R.image.{op}: layout must be a string, got {layout!r}")
    axes_of(layout)
    if isinstance(size, (int, np.integer, E.PrimExpr)):
        size = (size,) * dims
    roi = tuple(_number(v, "roi") for v in (roi if roi is not None else (0.0,) * (2 * dims)))
    if len(roi) != 2 * dims:
        raise OpAttributeError(f"R.image.{op}: roi has {2 * dims} values, got {len(roi)}")
    out_dtype = None if out_dtype in (None, "void", "") else attr_dtype(out_dtype, f"image.{op}", "out_dtype")
    return make_call(f"relax.image.{op}", [as_tensor(data), as_shape(size)], {
        "roi": roi, "layout": layout, "method": method,
        "coordinate_transformation_mode": coordinate_transformation_mode,
        "rounding_method": rounding_method,
        "cubic_alpha": _number(cubic_alpha, "cubic_alpha"),
        "cubic_exclude": int(_number(cubic_exclude, "cubic_exclude")),
        "extrapolation_value": _number(extrapolation_value, "extrapolation_value"),
        "out_dtype": out_dtype})


def resize2d(data, size, roi=None, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "round",
             cubic_alpha: float = -0.5, cubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype=None):
    """R.image.resize2d(data, size, roi=None, layout="NCHW", method="linear", ...)."""
    return _resize_call("resize2d", spatial_axes, 2, data, size, roi, layout, method, coordinate_transformation_mode,
                        rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)


def _infer_resize(call, ctx, op: str, axes_of, axis_names: str) -> TensorStructInfo:
    """The result of ``relax.image.<op>``: data's shape with its spatial axes (``axes_of(layout)``,
    named ``axis_names``) set to ``size``."""
    spatial = len(axis_names.split(", "))
    x = tensor_arg(call, 0, ctx, "data")
    size = shape_arg(call, 1, ctx)
    dtype = call.attrs["out_dtype"] or x.dtype
    if size.ndim >= 0 and size.ndim != spatial:
        ctx.error(f"relax.image.{op}: size has {spatial} values ({axis_names}), got {format_sinfo(size)}")
    if x.ndim >= 0 and x.ndim != spatial + 2:
        ctx.error(f"relax.image.{op}: data must be {spatial + 2}-D, got {format_sinfo(x)}")
    if x.shape is None or size.values is None:
        return TensorStructInfo(None, dtype, spatial + 2)
    dims = list(x.shape)
    for axis, value in zip(axes_of(call.attrs["layout"]), size.values):
        dims[axis] = value
    return TensorStructInfo(dims, dtype)


def _infer_resize2d(call, ctx) -> TensorStructInfo:
    return _infer_resize(call, ctx, "resize2d", spatial_axes, "height, width")


def source_coordinate(out_index, in_size, out_size, mode):
    """Float32 input coordinate of output positions ``out_index`` (NumPy, as the kernels)."""
    f32 = np.float32
    o = np.asarray(out_index, dtype=f32)
    scale = f32(in_size) / f32(out_size)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        x = (o + f32(0.5)) * scale - f32(0.5)
        if mode == "pytorch_half_pixel" and out_size == 1:
            x = np.zeros_like(o)
        return x
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros_like(o)
        return o * (f32(in_size - 1) / f32(out_size - 1))
    if mode == "asymmetric":
        return o * scale
    return (o + f32(0.5)) * scale     # tf_half_pixel_for_nn


def nearest(x, rounding):
    f32 = np.float32
    if rounding in ("round", ""):
        return np.sign(x) * np.floor(np.abs(x) + f32(0.5))     # half away from zero
    if rounding == "round_prefer_floor":
        return np.ceil(x - f32(0.5))
    if rounding == "round_prefer_ceil":
        return np.floor(x + f32(0.5))
    if rounding == "floor":
        return np.floor(x + f32(1e-5))
    return np.ceil(x - f32(1e-5))


def _resize2d_reference(data, size, roi=None, layout="NCHW", method="linear",
                        coordinate_transformation_mode="half_pixel", rounding_method="round",
                        cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    h_axis, w_axis = spatial_axes(layout)
    x = np.moveaxis(data, (h_axis, w_axis), (-2, -1)).astype(np.float32)
    in_h, in_w = x.shape[-2:]
    out_h, out_w = int(size[0]), int(size[1])
    ys = source_coordinate(np.arange(out_h), in_h, out_h, coordinate_transformation_mode)
    xs = source_coordinate(np.arange(out_w), in_w, out_w, coordinate_transformation_mode)
    if method == "nearest_neighbor":
        yi = np.clip(nearest(ys, rounding_method).astype(np.int64), 0, in_h - 1)
        xi = np.clip(nearest(xs, rounding_method).astype(np.int64), 0, in_w - 1)
        out = x[..., yi[:, None], xi[None, :]]
    else:
        y0, x0 = np.floor(ys), np.floor(xs)
        ty, tx = (ys - y0)[:, None], (xs - x0)[None, :]
        y0, x0 = y0.astype(np.int64), x0.astype(np.int64)

        def at(yy, xx):
            return x[..., np.clip(yy, 0, in_h - 1)[:, None], np.clip(xx, 0, in_w - 1)[None, :]]
        one = np.float32(1)
        top = at(y0, x0) * (one - tx) + at(y0, x0 + 1) * tx
        bottom = at(y0 + 1, x0) * (one - tx) + at(y0 + 1, x0 + 1) * tx
        out = top * (one - ty) + bottom * ty
    out = np.moveaxis(out, (-2, -1), (h_axis, w_axis))
    return out.astype(out_dtype or data.dtype)


register_op("relax.image.resize2d", _infer_resize2d, _resize2d_reference,
            attr_names=("roi", "layout", "method", "coordinate_transformation_mode",
                        "rounding_method", "cubic_alpha", "cubic_exclude", "extrapolation_value",
                        "out_dtype"),
            constructor=resize2d)

__all__ = ["resize2d"]


# ---------------------------------------------------------------- affine_grid
def affine_grid(data, size, align_corners: bool = True):
    """R.image.affine_grid(data, size, align_corners=True): the sampling grid of the 2-D
    affine maps ``data`` (``(n, 2, 3)``) over an ``(h, w)`` image, ``(n, 2, h, w)``:
    ``out[b, d, i, j] = data[b, d, 0] * x_j + data[b, d, 1] * y_i + data[b, d, 2]``, where
    ``x_j`` spans ``[-1, 1]`` over the ``w`` columns (corner centres when ``align_corners``,
    ``-1 + (2 j + 1) / w`` otherwise; a single column is at 0), ``y_i`` likewise."""
    if not isinstance(align_corners, (bool, np.bool_)):
        raise OpAttributeError(f"R.image.affine_grid: align_corners must be a bool, got "
                               f"{align_corners!r}")
    if isinstance(size, (int, np.integer, E.PrimExpr)):
        size = (size, size)
    return make_call("relax.image.affine_grid", [as_tensor(data), as_shape(size)],
                     {"align_corners": bool(align_corners)})


def _infer_affine_grid(call, ctx) -> TensorStructInfo:
    theta = tensor_arg(call, 0, ctx, "data")
    size = shape_arg(call, 1, ctx)
    if size.ndim >= 0 and size.ndim != 2:
        ctx.error(f"relax.image.affine_grid: size has 2 values (height, width), got "
                  f"{format_sinfo(size)}")
    if theta.ndim >= 0 and theta.ndim != 3:
        ctx.error(f"relax.image.affine_grid: data must be (batch, 2, 3), got {format_sinfo(theta)}")
    if theta.dtype and not theta.dtype.startswith(("float", "bfloat")):
        ctx.error(f"relax.image.affine_grid: data must be a float tensor, got {format_sinfo(theta)}")
    if theta.shape is not None:
        for axis, want in ((1, 2), (2, 3)):
            got = theta.shape[axis]
            if isinstance(got, E.IntImm) and got.value != want:
                ctx.error(f"relax.image.affine_grid: data must be (batch, 2, 3), got "
                          f"{format_sinfo(theta)}")
    if theta.shape is None or size.values is None:
        return TensorStructInfo(None, theta.dtype, 4)
    return TensorStructInfo([theta.shape[0], E.IntImm(2), *size.values], theta.dtype)


def grid_coordinates(count: int, align_corners: bool, dtype: str) -> np.ndarray:
    """The ``count`` coordinates of one axis in ``[-1, 1]``, computed in ``dtype`` as
    ``start + index * step``."""
    index = np.arange(count).astype(dtype)
    if count == 1:
        return np.zeros(1, dtype)
    if align_corners:
        start, step = np.asarray(-1.0, dtype), np.asarray(2.0, dtype) / np.asarray(count - 1, dtype)
    else:
        step = np.asarray(2.0, dtype) / np.asarray(count, dtype)
        start = np.asarray(-1.0, dtype) + step / np.asarray(2.0, dtype)
    return (start + index * step).astype(dtype)


def _affine_grid_reference(data, size, align_corners=True):
    height, width = (int(v) for v in size)
    dtype = data.dtype
    xs = grid_coordinates(width, align_corners, dtype)[None, None, None, :]
    ys = grid_coordinates(height, align_corners, dtype)[None, None, :, None]
    a, b, c = (data[:, :, k][:, :, None, None] for k in range(3))
    return np.ascontiguousarray((a * xs + b * ys + c).astype(dtype))


register_op("relax.image.affine_grid", _infer_affine_grid, _affine_grid_reference,
            attr_names=("align_corners",), constructor=affine_grid)

__all__ += ["affine_grid"]


# ---------------------------------------------------------------- resize3d
def volume_axes(layout: str) -> tuple[int, int, int]:
    """The D, H and W axes of a permutation of ``NCDHW``."""
    if not isinstance(layout, str) or sorted(layout) != sorted("NCDHW"):
        raise OpAttributeError(f"R.image.resize3d: layout {layout!r} is not supported; use a "
                               "permutation of NCDHW (split layouts such as NCDHW16c are not)")
    return layout.index("D"), layout.index("H"), layout.index("W")


def resize3d(data, size, roi=None, layout: str = "NCDHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "round",
             cubic_alpha: float = -0.5, cubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype=None):
    """R.image.resize3d(data, size, roi=None, layout="NCDHW", method="linear", ...): resize2d's
    coordinates and roundings on three axes; ``linear`` interpolates W, then H, then D."""
    return _resize_call("resize3d", volume_axes, 3, data, size, roi, layout, method, coordinate_transformation_mode,
                        rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)


def _infer_resize3d(call, ctx) -> TensorStructInfo:
    return _infer_resize(call, ctx, "resize3d", volume_axes, "depth, height, width")


def _resize3d_reference(data, size, roi=None, layout="NCDHW", method="linear",
                        coordinate_transformation_mode="half_pixel", rounding_method="round",
                        cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
    axes = volume_axes(layout)
    x = np.moveaxis(data, axes, (-3, -2, -1)).astype(np.float32)
    ins = x.shape[-3:]
    outs = [int(s) for s in size]
    coords = [source_coordinate(np.arange(o), i, o, coordinate_transformation_mode)
              for i, o in zip(ins, outs)]
    grid = (lambda a: a[:, None, None], lambda a: a[None, :, None], lambda a: a[None, None, :])

    def at(idx):
        return x[(Ellipsis, *[g(np.clip(i, 0, n - 1)) for g, i, n in zip(grid, idx, ins)])]
    if method == "nearest_neighbor":
        out = at([nearest(c, rounding_method).astype(np.int64) for c in coords])
    else:
        lows = [np.floor(c) for c in coords]
        ts = [g(c - lo) for g, c, lo in zip(grid, coords, lows)]
        lows = [lo.astype(np.int64) for lo in lows]
        one = np.float32(1)

        def lerp_w(d, h):
            return at([d, h, lows[2]]) * (one - ts[2]) + at([d, h, lows[2] + 1]) * ts[2]

        def lerp_hw(d):
            return lerp_w(d, lows[1]) * (one - ts[1]) + lerp_w(d, lows[1] + 1) * ts[1]
        out = lerp_hw(lows[0]) * (one - ts[0]) + lerp_hw(lows[0] + 1) * ts[0]
    out = np.moveaxis(out, (-3, -2, -1), axes)
    return np.ascontiguousarray(out.astype(out_dtype or data.dtype))


register_op("relax.image.resize3d", _infer_resize3d, _resize3d_reference,
            attr_names=("roi", "layout", "method", "coordinate_transformation_mode",
                        "rounding_method", "cubic_alpha", "cubic_exclude", "extrapolation_value",
                        "out_dtype"),
            constructor=resize3d)

__all__ += ["resize3d"]
