"""Reductions: sum/prod/max/min, mean/variance (NumPy accumulation dtypes), argmax/argmin."""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import compute, max_value, reduce_max, reduce_min, reduce_prod, reduce_sum

from .common import (accumulation_dtype, flat_index, normalize_axes, op_short_name, product,
                     reduce_axes_for, reduction_input_index)
from .registry import register_legalize

_SIMPLE = {"sum": reduce_sum, "prod": reduce_prod, "max": reduce_max, "min": reduce_min}


class _Reduction:
    """Shared setup: input placeholder, reduced axes, output shape and index mapping."""

    def __init__(self, ctx, call, axes):
        self.te = ctx.te(call)
        self.x = self.te.placeholder(call.args[0], "x")
        self.axes = normalize_axes(axes, self.x.ndim)
        self.keepdims = call.attrs["keepdims"]
        self.out_shape = self.te.out_shape()
        self.count = product(self.x.shape[a] for a in self.axes)

    def load(self, out_index, raxes):
        return self.x[reduction_input_index(self.x.ndim, self.axes, self.keepdims, out_index, raxes)]

    def reduce(self, combine, value_of, name: str, dtype: str | None = None):
        """A stage: ``combine`` over the reduced axes of ``value_of(load, out_index)``."""
        def body(*idx):
            raxes = reduce_axes_for(self.x.shape, self.axes)
            return combine(value_of(self.load(idx, raxes), idx, raxes), raxes)
        return compute(self.out_shape, body, name, dtype)

    def mean(self, acc: str, dtype: str | None = None):
        """Sum in ``acc``, divide by the count in ``acc``, store as ``dtype`` (default ``acc``)."""
        total = self.reduce(reduce_sum, lambda v, idx, r: E.cast(acc, v), "T_sum", acc)
        return compute(self.out_shape, lambda *idx: total[idx] / E.cast(acc, self.count),
                       "T_mean", dtype or acc)


def _make_simple(combine):
    def legalize(ctx, call):
        r = _Reduction(ctx, call, call.attrs.get("axis"))
        name = op_short_name(call)
        out = r.reduce(combine, lambda v, idx, raxes: v, "T_" + name, r.te.out_dtype())
        return r.te.emit(name, out)
    return legalize


for _name, _combine in _SIMPLE.items():
    register_legalize("relax." + _name)(_make_simple(_combine))


@register_legalize("relax.mean")
def _mean(ctx, call):
    r = _Reduction(ctx, call, call.attrs.get("axis"))
    dtype = r.te.out_dtype()
    return r.te.emit("mean", r.mean(accumulation_dtype(dtype), dtype))


@register_legalize("relax.variance")
@register_legalize("relax.std")
def _variance(ctx, call):
    r = _Reduction(ctx, call, call.attrs.get("axis"))
    dtype = r.te.out_dtype()
    acc = accumulation_dtype(dtype)
    mean = r.mean(acc)

    def squared_deviation(v, idx, raxes):
        deviation = E.cast(acc, v) - mean[idx]
        return deviation * deviation

    total = r.reduce(reduce_sum, squared_deviation, "T_sq_sum", acc)
    name = op_short_name(call)
    if name == "std":
        def body(*idx):
            return E.call_intrin("sqrt", total[idx] / E.cast(acc, r.count))
    else:
        def body(*idx):
            return total[idx] / E.cast(acc, r.count)
    return r.te.emit(name, compute(r.out_shape, body, "T_" + name, dtype))


def _make_arg_reduce(combine):
    """First index of the extreme value: reduce the value, then the smallest index holding it."""
    def legalize(ctx, call):
        axis = call.attrs.get("axis")
        r = _Reduction(ctx, call, None if axis is None else (axis,))
        name = op_short_name(call)
        extreme = r.reduce(combine, lambda v, idx, raxes: v, "T_" + name + "_value")
        reduced_dims = [r.x.shape[a] for a in r.axes]
        never = E.IntImm(max_value("int64"))

        is_float = dt.is_float(r.x.dtype)

        def first_index(v, idx, raxes):
            position = flat_index([ax.var for ax in raxes], reduced_dims)
            hit = E.EQ(v, extreme[idx])
            if is_float:   # max/min propagate NaN, which equals nothing: the first NaN, as NumPy
                hit = E.Or(hit, E.NE(v, v))
            return E.Select(hit, position, never)

        out = r.reduce(reduce_min, first_index, "T_" + name, "int64")
        return r.te.emit(name, out)
    return legalize


register_legalize("relax.argmax")(_make_arg_reduce(reduce_max))
register_legalize("relax.argmin")(_make_arg_reduce(reduce_min))
