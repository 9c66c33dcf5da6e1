"""``R.nn.softmax`` / ``log_softmax`` (max-subtracted, as the references),
``layer_norm`` / ``rms_norm`` / ``batch_norm`` / ``group_norm`` / ``instance_norm``
(two-pass statistics in the accumulation dtype: the input dtype, float32 for
float16 inputs) and ``prelu``."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_max, reduce_sum

from ...op.nn_norm import instance_axes
from .common import (accumulation_dtype, normalize_axes, op_short_name, product, reduce_axes_for,
                     reduction_input_index, without)
from .registry import register_legalize


def _axis_reduction(x, axis: int, combine, value_of, name: str, dtype: str | None = None):
    """``combine`` over ``axis`` of ``value_of(load, out_index)``; the axis is dropped."""
    shape = list(without(x.shape, [axis]))

    def body(*idx):
        k = reduce_axis(x.shape[axis], "k")
        index = reduction_input_index(x.ndim, [axis], False, idx, [k])
        return combine(value_of(x[index], idx), [k])

    return compute(shape, body, name, dtype)


@register_legalize("relax.nn.softmax")
def _softmax(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axis = call.attrs["axis"] % x.ndim
    peak = _axis_reduction(x, axis, reduce_max, lambda v, idx: v, "T_max")
    shifted_exp = compute(x.shape, lambda *i: E.call_intrin("exp", x[i] - peak[without(i, [axis])]),
                          "T_exp")
    total = _axis_reduction(shifted_exp, axis, reduce_sum, lambda v, idx: v, "T_sum")
    out = compute(x.shape, lambda *i: shifted_exp[i] / total[without(i, [axis])], "T_softmax")
    return te.emit("softmax", out)


@register_legalize("relax.nn.log_softmax")
def _log_softmax(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axis = call.attrs["axis"] % x.ndim
    peak = _axis_reduction(x, axis, reduce_max, lambda v, idx: v, "T_max")
    total = _axis_reduction(x, axis, reduce_sum,
                            lambda v, idx: E.call_intrin("exp", v - peak[idx]), "T_sum")

    def body(*i):
        outer = without(i, [axis])
        return (x[i] - peak[outer]) - E.call_intrin("log", total[outer])

    return te.emit("log_softmax", compute(x.shape, body, "T_log_softmax"))


class _Norm:
    """Statistics of ``x`` over the normalised axes, kept at the reduced shape."""

    def __init__(self, te, x, axes):
        self.x = x
        self.axes = normalize_axes(axes, x.ndim)
        self.order = [a % x.ndim for a in axes]  # parameter dims follow the axes as given
        self.acc = accumulation_dtype(x.dtype)
        self.count = E.cast(self.acc, product(x.shape[a] for a in self.axes))
        self.shape = list(without(x.shape, self.axes))

    def sum(self, value_of, name: str):
        def body(*idx):
            raxes = reduce_axes_for(self.x.shape, self.axes)
            index = reduction_input_index(self.x.ndim, self.axes, False, idx, raxes)
            return reduce_sum(value_of(E.cast(self.acc, self.x[index]), idx), raxes)
        return compute(self.shape, body, name, self.acc)

    def outer(self, index):
        return without(index, self.axes)

    def param(self, tensor, index):
        """Load a gamma/beta/weight element for the input element at ``index``."""
        return E.cast(self.acc, tensor[tuple(index[a] for a in self.order)])


@register_legalize("relax.nn.layer_norm")
def _layer_norm(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    gamma = te.placeholder(call.args[1], "gamma")
    beta = te.placeholder(call.args[2], "beta")
    norm = _Norm(te, x, call.attrs["axes"])
    eps = E.const(float(call.attrs["epsilon"]), norm.acc)
    total = norm.sum(lambda v, idx: v, "T_sum")

    def mean(idx):
        return total[idx] / norm.count

    def squared_deviation(v, idx):
        deviation = v - mean(idx)
        return deviation * deviation

    sq_total = norm.sum(squared_deviation, "T_sq_sum")

    def body(*i):
        outer = norm.outer(i)
        centered = E.cast(norm.acc, x[i]) - mean(outer)
        scaled = centered / E.call_intrin("sqrt", sq_total[outer] / norm.count + eps)
        return scaled * norm.param(gamma, i) + norm.param(beta, i)

    return te.emit("layer_norm", compute(x.shape, body, "T_layer_norm", x.dtype))


@register_legalize("relax.nn.rms_norm")
def _rms_norm(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    weight = te.placeholder(call.args[1], "weight")
    norm = _Norm(te, x, call.attrs["axes"])
    eps = E.const(float(call.attrs["epsilon"]), norm.acc)
    sq_total = norm.sum(lambda v, idx: v * v, "T_sq_sum")

    def body(*i):
        rms = E.call_intrin("sqrt", sq_total[norm.outer(i)] / norm.count + eps)
        return E.cast(norm.acc, x[i]) / rms * norm.param(weight, i)

    return te.emit("rms_norm", compute(x.shape, body, "T_rms_norm", x.dtype))


def _channel_param(acc, tensor, index):
    return E.cast(acc, tensor[(index,)])


def _finish(acc, normalized, gamma, beta, channel_index, attrs):
    """``normalized * gamma[c] + beta[c]`` as ``scale``/``center`` ask."""
    if attrs["scale"]:
        normalized = normalized * _channel_param(acc, gamma, channel_index)
    if attrs["center"]:
        normalized = normalized + _channel_param(acc, beta, channel_index)
    return normalized


@register_legalize("relax.nn.batch_norm")
def _batch_norm(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    gamma, beta, moving_mean, moving_var = (te.placeholder(call.args[i], name) for i, name in
                                            ((1, "gamma"), (2, "beta"), (3, "moving_mean"),
                                             (4, "moving_var")))
    a = call.attrs
    axis = a["axis"] % x.ndim
    acc = accumulation_dtype(x.dtype)
    eps = E.const(float(a["epsilon"]), acc)
    others = [d for d in range(x.ndim) if d != axis]
    norm = _Norm(te, x, others)
    if a["training"]:
        total = norm.sum(lambda v, idx: v, "T_sum")
        mean = compute([x.shape[axis]], lambda c: total[(c,)] / norm.count, "T_mean", acc)
        sq_total = norm.sum(lambda v, idx: (v - mean[idx]) * (v - mean[idx]), "T_sq_sum")
        var = compute([x.shape[axis]], lambda c: sq_total[(c,)] / norm.count, "T_var", acc)

        def stat(tensor, c):
            return tensor[(c,)]
    else:
        mean, var = moving_mean, moving_var

        def stat(tensor, c):
            return E.cast(acc, tensor[(c,)])

    def body(*i):
        c = i[axis]
        normalized = (E.cast(acc, x[i]) - stat(mean, c)) / E.call_intrin("sqrt", stat(var, c) + eps)
        return _finish(acc, normalized, gamma, beta, c, a)

    out = compute(x.shape, body, "T_batch_norm", x.dtype)
    if a["training"]:
        keep = E.const(1.0 - float(a["momentum"]), acc)
        move = E.const(float(a["momentum"]), acc)

        def moved(old, batch, name):
            return compute(old.shape, lambda c: E.cast(old.dtype, keep * E.cast(acc, old[(c,)])
                                                       + move * batch[(c,)]), name, old.dtype)
        new_mean = moved(moving_mean, mean, "T_new_mean")
        new_var = moved(moving_var, var, "T_new_var")
    else:   # the running statistics pass through (copies: outputs are fresh buffers)
        new_mean = compute(moving_mean.shape, lambda c: moving_mean[(c,)], "T_mean_copy")
        new_var = compute(moving_var.shape, lambda c: moving_var[(c,)], "T_var_copy")
    return te.emit("batch_norm", [out, new_mean, new_var])


def _group_norm_stages(te, call, x, channel: int, groups, axes):
    """Mean and variance per (outer index, group), shape ``[outer dims..., groups]``."""
    acc = accumulation_dtype(x.dtype)
    outer = [d for d in range(x.ndim) if d != channel and d not in axes]
    size = te.simplify(E.floordiv(x.shape[channel], groups))
    shape = [x.shape[d] for d in outer] + [E.convert(groups)]
    count = E.cast(acc, size * product(x.shape[d] for d in axes))

    def input_index(idx, rc, raxes):
        index = [None] * x.ndim
        for d, v in zip(outer, idx[:-1]):
            index[d] = v
        index[channel] = idx[-1] * size + rc.var
        for d, ax in zip(axes, raxes):
            index[d] = ax.var
        return tuple(index)

    def total(value_of, name):
        def body(*idx):
            rc = reduce_axis(size, "kc")
            raxes = [reduce_axis(x.shape[d], f"k{j}") for j, d in enumerate(axes)]
            v = E.cast(acc, x[input_index(idx, rc, raxes)])
            return reduce_sum(value_of(v, idx), [rc, *raxes])
        return compute(shape, body, name, acc)

    sums = total(lambda v, idx: v, "T_sum")
    mean = compute(shape, lambda *idx: sums[idx] / count, "T_mean", acc)
    sq = total(lambda v, idx: (v - mean[idx]) * (v - mean[idx]), "T_sq_sum")
    var = compute(shape, lambda *idx: sq[idx] / count, "T_var", acc)

    def stat_index(i):
        return (*(i[d] for d in outer), E.floordiv(i[channel], size))
    return acc, mean, var, stat_index


def _legalize_group_norm(ctx, call, groups_of, axes_of):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    gamma = te.placeholder(call.args[1], "gamma")
    beta = te.placeholder(call.args[2], "beta")
    a = call.attrs
    channel = a["channel_axis"] % x.ndim
    acc, mean, var, stat_index = _group_norm_stages(te, call, x, channel, groups_of(x, channel),
                                                    axes_of(x, channel))
    eps = E.const(float(a["epsilon"]), acc)

    def body(*i):
        s = stat_index(i)
        normalized = (E.cast(acc, x[i]) - mean[s]) / E.call_intrin("sqrt", var[s] + eps)
        return _finish(acc, normalized, gamma, beta, i[channel], a)

    name = op_short_name(call)
    return te.emit(name, compute(x.shape, body, "T_" + name, x.dtype))


@register_legalize("relax.nn.group_norm")
def _group_norm(ctx, call):
    return _legalize_group_norm(ctx, call, lambda x, c: E.IntImm(call.attrs["num_groups"]),
                                lambda x, c: sorted(d % x.ndim for d in call.attrs["axes"]))


@register_legalize("relax.nn.instance_norm")
def _instance_norm(ctx, call):
    return _legalize_group_norm(ctx, call, lambda x, c: x.shape[c],
                                lambda x, c: instance_axes(x.ndim, c, call.attrs["axes"]))


@register_legalize("relax.nn.prelu")
def _prelu(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    alpha = te.placeholder(call.args[1], "alpha")
    axis = call.attrs["axis"] % x.ndim

    def body(*i):
        slope = alpha[(E.IntImm(0) if te.is_one(alpha.shape[0]) else i[axis],)]
        return E.Select(E.LT(x[i], E.const(0, x.dtype)), slope * x[i], x[i])

    return te.emit("prelu", compute(x.shape, body, "T_prelu", x.dtype))
