"""``R.nn.softmax`` / ``log_softmax`` (max-subtracted, as the references) and
``layer_norm`` / ``rms_norm`` (statistics as NumPy computes them: in the
input dtype, float32 for float16 inputs)."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_max, reduce_sum

from .common import (accumulation_dtype, normalize_axes, product, reduce_axes_for,
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
