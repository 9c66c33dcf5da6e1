"""Sliding-window ops: ``R.nn.conv1d/conv2d`` and the 2-D pools.

Each output element reduces over its window directly; padding is a guarded
load (``T.if_then_else`` of the in-bounds test), so no padded copy of the
input is materialised. Averages divide by a per-position count stage of the
output's spatial shape.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, min_value, reduce_axis, reduce_max, reduce_sum

from .common import op_short_name
from .registry import register_legalize


def _all(conditions):
    result = None
    for c in conditions:
        result = c if result is None else E.And(result, c)
    return result if result is not None else E.const(True, "bool")


def _input_positions(out_index, kernel_index, attrs):
    """Input coordinates (in the unpadded input) that output/kernel positions read."""
    d = len(out_index)
    return [out_index[i] * attrs["strides"][i] + kernel_index[i] * attrs["dilation"][i]
            - attrs["padding"][i] for i in range(d)]


def _inside(positions, lows, highs):
    conds = []
    for p, lo, hi in zip(positions, lows, highs):
        conds += [E.GE(p, lo), E.LT(p, hi)]
    return _all(conds)


def _known_shape(call) -> bool:
    sinfo = call.struct_info
    return getattr(sinfo, "shape", None) is not None and all(
        getattr(a.struct_info, "shape", None) is not None for a in call.args)


def _conv(ctx, call):
    if not _known_shape(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    weight = te.placeholder(call.args[1], "weight")
    attrs = call.attrs
    dtype = te.out_dtype()
    groups = attrs["groups"]
    spatial = data.shape[2:]
    out_per_group = E.floordiv(weight.shape[0], groups)

    def body(n, o, *out_pos):
        rc = reduce_axis(weight.shape[1], "rc")
        taps = [reduce_axis(k, f"r{i}") for i, k in enumerate(weight.shape[2:])]
        positions = _input_positions(out_pos, [t.var for t in taps], attrs)
        channel = rc.var if groups == 1 else E.floordiv(o, out_per_group) * weight.shape[1] + rc.var
        load = E.cast(dtype, data[(n, channel, *positions)])
        if any(attrs["padding"]):
            load = E.select(_inside(positions, [0] * len(spatial), spatial), load, E.const(0, dtype))
        tap = E.cast(dtype, weight[(o, rc.var, *[t.var for t in taps])])
        return reduce_sum(load * tap, [rc, *taps])

    name = op_short_name(call)
    return te.emit(name, compute(te.out_shape(), body, "T_" + name, dtype))


register_legalize("relax.nn.conv1d")(_conv)
register_legalize("relax.nn.conv2d")(_conv)
register_legalize("relax.nn.conv3d")(_conv)


@register_legalize("relax.nn.max_pool2d")
@register_legalize("relax.nn.max_pool3d")
def _max_pool2d(ctx, call):
    if not _known_shape(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    attrs = call.attrs
    lowest = E.const(min_value(data.dtype), data.dtype)

    def body(n, c, *out_pos):
        taps = [reduce_axis(k, f"r{i}") for i, k in enumerate(attrs["pool_size"])]
        positions = _input_positions(out_pos, [t.var for t in taps], attrs)
        load = E.select(_inside(positions, [0] * len(positions), data.shape[2:]),
                        data[(n, c, *positions)], lowest)
        return reduce_max(load, taps)

    name = op_short_name(call)
    return te.emit(name, compute(te.out_shape(), body, "T_" + name))


@register_legalize("relax.nn.avg_pool2d")
@register_legalize("relax.nn.avg_pool3d")
def _avg_pool2d(ctx, call):
    if not _known_shape(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    attrs = call.attrs
    dtype = data.dtype
    spatial = list(data.shape[2:])
    nd = len(spatial)
    if attrs["count_include_pad"]:
        pad = attrs["padding"]
        counted = ([-pad[i] for i in range(nd)], [spatial[i] + pad[nd + i] for i in range(nd)])
    else:
        counted = ([0] * nd, spatial)

    def window_sum(value_of):
        def body(*index):
            out_pos = index[-nd:]
            taps = [reduce_axis(k, f"r{i}") for i, k in enumerate(attrs["pool_size"])]
            positions = _input_positions(out_pos, [t.var for t in taps], attrs)
            return reduce_sum(value_of(index[:-nd], positions), taps)
        return body

    def element(lead, positions):
        return E.select(_inside(positions, [0] * nd, spatial), data[(*lead, *positions)],
                        E.const(0, dtype))

    def one_if_counted(_lead, positions):
        return E.select(_inside(positions, *counted), E.const(1, dtype), E.const(0, dtype))

    out_shape = te.out_shape()
    total = compute(out_shape, window_sum(element), "T_pool_sum")
    count = compute(out_shape[2:], window_sum(one_if_counted), "T_pool_count", dtype)
    name = op_short_name(call)
    out = compute(out_shape, lambda n, c, *pos: total[(n, c, *pos)] / count[pos], "T_" + name)
    return te.emit(name, out)


@register_legalize("relax.nn.adaptive_avg_pool2d")
@register_legalize("relax.nn.adaptive_avg_pool3d")
def _adaptive_avg_pool2d(ctx, call):
    if not _known_shape(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    dtype = data.dtype
    out_shape = te.out_shape()
    spatial, out_spatial = list(data.shape[2:]), out_shape[2:]

    def bounds(i, axis):
        size, out = spatial[axis], out_spatial[axis]
        return E.floordiv(i * size, out), E.floordiv((i + 1) * size + out - 1, out)

    nd = len(spatial)

    def body(n, c, *pos):
        # the widest window: ceil(size / out) + 1 rows; the rest of each window is masked
        taps = [reduce_axis(E.floordiv(spatial[a] + out_spatial[a] - 1, out_spatial[a]) + 1, f"r{a}")
                for a in range(nd)]
        index, inside = [], None
        for a in range(nd):
            lo, hi = bounds(pos[a], a)
            at = lo + taps[a].var
            index.append(at)
            inside = E.LT(at, hi) if inside is None else E.And(inside, E.LT(at, hi))
        return reduce_sum(E.select(inside, data[(n, c, *index)], E.const(0, dtype)), taps)

    total = compute(out_shape, body, "T_adaptive_sum")

    def average(n, c, *pos):
        count = None
        for a in range(nd):
            lo, hi = bounds(pos[a], a)
            count = (hi - lo) if count is None else count * (hi - lo)
        return total[(n, c, *pos)] / E.cast(dtype, count)

    name = op_short_name(call)
    return te.emit(name, compute(out_shape, average, "T_" + name))


@register_legalize("relax.nn.conv2d_transpose")
@register_legalize("relax.nn.conv3d_transpose")
def _conv_transpose(ctx, call):
    """``out[y] = sum data[t / s] * w[k]`` over the taps ``k`` whose ``t = y + pad - k * d``
    is a multiple of the stride inside the input (every spatial axis alike)."""
    if not _known_shape(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    weight = te.placeholder(call.args[1], "weight")
    attrs = call.attrs
    dtype = te.out_dtype()
    groups = attrs["groups"]
    in_per_group = E.floordiv(data.shape[1], groups)
    out_per_group = weight.shape[1]

    def body(n, o, *out_pos):
        rc = reduce_axis(in_per_group, "rc")
        taps = [reduce_axis(k, f"r{i}") for i, k in enumerate(weight.shape[2:])]
        channel = rc.var if groups == 1 else E.floordiv(o, out_per_group) * in_per_group + rc.var
        conds, source = [], []
        for axis, (pos, tap) in enumerate(zip(out_pos, taps)):
            stride = attrs["strides"][axis]
            t = pos + attrs["padding"][axis] - tap.var * attrs["dilation"][axis]
            conds += [E.GE(t, 0), E.LT(E.floordiv(t, stride), data.shape[2 + axis])]
            if stride > 1:
                conds.append(E.EQ(E.floormod(t, stride), 0))
            source.append(E.floordiv(t, stride) if stride > 1 else t)
        load = E.select(_all(conds), E.cast(dtype, data[(n, channel, *source)]), E.const(0, dtype))
        o_in_group = o if groups == 1 else E.floormod(o, out_per_group)
        return reduce_sum(load * E.cast(dtype, weight[(channel, o_in_group, *[t.var for t in taps])]),
                          [rc, *taps])

    name = op_short_name(call)
    return te.emit(name, compute(te.out_shape(), body, "T_" + name, dtype))
