"""``R.image.resize2d`` (nearest and linear): per output element, the float32 source
coordinate of each resized axis as the reference computes it, then one load (nearest) or
four clamped loads interpolated (linear)."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from ...op.image import spatial_axes, volume_axes
from .registry import register_legalize

F32 = "float32"


def _f(value):
    return E.const(value, F32)


def _coordinate(o, in_size, out_size, mode):
    o = E.cast(F32, o)
    scale = E.cast(F32, in_size) / E.cast(F32, out_size)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        x = (o + _f(0.5)) * scale - _f(0.5)
        if mode == "pytorch_half_pixel":
            x = E.select(E.EQ(out_size, E.IntImm(1)), _f(0.0), x)
        return x
    if mode == "align_corners":
        ratio = E.cast(F32, in_size - 1) / E.cast(F32, E.max_(out_size - 1, E.IntImm(1)))
        return E.select(E.EQ(out_size, E.IntImm(1)), _f(0.0), o * ratio)
    if mode == "asymmetric":
        return o * scale
    return (o + _f(0.5)) * scale     # tf_half_pixel_for_nn


def _nearest(x, rounding):
    floor, ceil = (lambda v: E.call_intrin("floor", v)), (lambda v: E.call_intrin("ceil", v))
    if rounding in ("round", ""):      # half away from zero
        return E.select(E.LT(x, _f(0.0)), _f(0.0) - floor(_f(0.5) - x), floor(x + _f(0.5)))
    if rounding == "round_prefer_floor":
        return ceil(x - _f(0.5))
    if rounding == "round_prefer_ceil":
        return floor(x + _f(0.5))
    if rounding == "floor":
        return floor(x + _f(1e-5))
    return ceil(x - _f(1e-5))


def _clamp(i, size):
    return E.max_(E.min_(i, size - 1), E.IntImm(0))


@register_legalize("relax.image.resize2d")
def _resize2d(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    a = call.attrs
    h_axis, w_axis = spatial_axes(a["layout"])
    out_shape = te.out_shape()
    in_h, in_w = x.shape[h_axis], x.shape[w_axis]
    out_h, out_w = out_shape[h_axis], out_shape[w_axis]
    mode = a["coordinate_transformation_mode"]
    dtype = te.out_dtype()

    def load(idx, yy, xx):
        index = list(idx)
        index[h_axis], index[w_axis] = _clamp(yy, in_h), _clamp(xx, in_w)
        return E.cast(F32, x[tuple(index)])

    def body(*idx):
        ys = _coordinate(idx[h_axis], in_h, out_h, mode)
        xs = _coordinate(idx[w_axis], in_w, out_w, mode)
        if a["method"] == "nearest_neighbor":
            yi = E.cast("int64", _nearest(ys, a["rounding_method"]))
            xi = E.cast("int64", _nearest(xs, a["rounding_method"]))
            return E.cast(dtype, load(idx, yi, xi))
        y0f, x0f = E.call_intrin("floor", ys), E.call_intrin("floor", xs)
        ty, tx = ys - y0f, xs - x0f
        y0, x0 = E.cast("int64", y0f), E.cast("int64", x0f)
        one = _f(1.0)
        top = load(idx, y0, x0) * (one - tx) + load(idx, y0, x0 + 1) * tx
        bottom = load(idx, y0 + 1, x0) * (one - tx) + load(idx, y0 + 1, x0 + 1) * tx
        return E.cast(dtype, top * (one - ty) + bottom * ty)

    return te.emit("resize2d", compute(out_shape, body, "T_resize2d", dtype))


@register_legalize("relax.image.affine_grid")
def _affine_grid(ctx, call):
    """One stage: ``theta[b, d, 0] * x_j + theta[b, d, 1] * y_i + theta[b, d, 2]`` with the
    coordinates ``start + index * step`` in the data's dtype, as the reference."""
    te = ctx.te(call)
    theta = te.placeholder(call.args[0], "theta")
    dtype = theta.dtype
    align = call.attrs["align_corners"]
    out_shape = te.out_shape()

    def coordinate(index, count):
        c = lambda v: E.cast(dtype, v)  # noqa: E731
        if align:
            start, step = E.const(-1.0, dtype), c(2.0) / c(E.max_(count - 1, E.IntImm(1)))
        else:
            step = c(2.0) / c(count)
            start = E.const(-1.0, dtype) + step / E.const(2.0, dtype)
        return E.select(E.EQ(count, E.IntImm(1)), E.const(0.0, dtype), start + c(index) * step)

    def body(b, d, i, j):
        x = coordinate(j, out_shape[3])
        y = coordinate(i, out_shape[2])
        return theta[(b, d, 0)] * x + theta[(b, d, 1)] * y + theta[(b, d, 2)]

    return te.emit("affine_grid", compute(out_shape, body, "T_affine_grid", dtype))


@register_legalize("relax.image.resize3d")
def _resize3d(ctx, call):
    """resize2d's per-axis coordinates on D, H, W; ``linear`` lerps W, then H, then D, in the
    reference's order."""
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    a = call.attrs
    axes = volume_axes(a["layout"])
    out_shape = te.out_shape()
    ins = [x.shape[ax] for ax in axes]
    outs = [out_shape[ax] for ax in axes]
    mode = a["coordinate_transformation_mode"]
    dtype = te.out_dtype()

    def load(idx, at):
        index = list(idx)
        for ax, i, n in zip(axes, at, ins):
            index[ax] = _clamp(i, n)
        return E.cast(F32, x[tuple(index)])

    def body(*idx):
        coords = [_coordinate(idx[ax], n, o, mode) for ax, n, o in zip(axes, ins, outs)]
        if a["method"] == "nearest_neighbor":
            return E.cast(dtype, load(idx, [E.cast("int64", _nearest(c, a["rounding_method"]))
                                            for c in coords]))
        floors = [E.call_intrin("floor", c) for c in coords]
        ts = [c - f for c, f in zip(coords, floors)]
        lows = [E.cast("int64", f) for f in floors]
        one = _f(1.0)

        def lerp_w(d, h):
            return load(idx, [d, h, lows[2]]) * (one - ts[2]) + load(idx, [d, h, lows[2] + 1]) * ts[2]

        def lerp_hw(d):
            return lerp_w(d, lows[1]) * (one - ts[1]) + lerp_w(d, lows[1] + 1) * ts[1]
        return E.cast(dtype, lerp_hw(lows[0]) * (one - ts[0]) + lerp_hw(lows[0] + 1) * ts[0])

    return te.emit("resize3d", compute(out_shape, body, "T_resize3d", dtype))
