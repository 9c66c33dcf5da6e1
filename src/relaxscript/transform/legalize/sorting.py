"""``R.sort`` / ``R.argsort`` / ``R.topk`` by ranks: element ``i``'s rank along the axis is the
number of elements ordered before it (stable: ties by index; NaN largest),
and output position ``p`` takes the element whose rank is ``p``. Both stages
are ``O(n^2)`` along the axis, with no data-dependent memory access."""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_sum

from ...struct_info import TupleStructInfo
from .registry import register_legalize


def _less(a, b):
    """``a < b`` with NaN the largest value."""
    if not dt.is_float(a.dtype):
        return E.LT(a, b)
    return E.Or(E.LT(a, b), E.And(E.call_intrin("isnan", b), E.Not(E.call_intrin("isnan", a))))


def _ranks(x, axis: int, descending: bool):
    def body(*i):
        j = reduce_axis(x.shape[axis], "j")
        other = x[(*i[:axis], j.var, *i[axis + 1:])]
        mine = x[i]
        first, second = (mine, other) if descending else (other, mine)
        earlier = _less(first, second)
        tie = E.And(E.Not(_less(other, mine)), E.Not(_less(mine, other)))
        before = E.Or(earlier, E.And(tie, E.LT(j.var, i[axis])))
        return reduce_sum(E.select(before, E.IntImm(1), E.IntImm(0)), [j])
    return compute(x.shape, body, "T_rank", "int64")


def _placed(x, rank, axis: int, shape, value_of, name: str, dtype: str):
    """Output position ``p`` along ``axis``: ``value_of(i)`` of the element ranked ``p``."""
    def body(*p):
        i = reduce_axis(x.shape[axis], "i")
        index = (*p[:axis], i.var, *p[axis + 1:])
        return reduce_sum(E.select(E.EQ(rank[index], p[axis]), value_of(index),
                                   E.const(0, dtype)), [i])
    return compute(shape, body, name, dtype)


def _known(call) -> bool:
    return call.args[0].struct_info.shape is not None


@register_legalize("relax.sort")
def _sort(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axis = call.attrs["axis"] % x.ndim
    rank = _ranks(x, axis, call.attrs["descending"])
    return te.emit("sort", _placed(x, rank, axis, x.shape, lambda index: x[index], "T_sort",
                                   x.dtype))


@register_legalize("relax.argsort")
def _argsort(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    axis = call.attrs["axis"] % x.ndim
    dtype = call.attrs["dtype"]
    rank = _ranks(x, axis, call.attrs["descending"])
    out = _placed(x, rank, axis, x.shape, lambda index: E.cast(dtype, index[axis]), "T_argsort",
                  dtype)
    return te.emit("argsort", out)


@register_legalize("relax.topk")
def _topk(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    a = call.attrs
    axis = a["axis"] % x.ndim
    rank = _ranks(x, axis, a["largest"])
    sinfo = call.struct_info
    shape = te.out_shape(0) if isinstance(sinfo, TupleStructInfo) else te.out_shape()
    outputs = []
    if a["ret_type"] in ("both", "values"):
        outputs.append(_placed(x, rank, axis, shape, lambda index: x[index], "T_topk_values",
                               x.dtype))
    if a["ret_type"] in ("both", "indices"):
        outputs.append(_placed(x, rank, axis, shape, lambda index: E.cast(a["dtype"], index[axis]),
                               "T_topk_indices", a["dtype"]))
    return te.emit("topk", outputs)


@register_legalize("relax.median")
def _median(ctx, call):
    """Ranks over the reduced axes (one axis, or all of them for ``axis=None``: ties then go
    by row-major position), and the element ranked ``(n - 1) // 2`` of each kept position."""
    if not _known(call):
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axis, keepdims = call.attrs["axis"], call.attrs["keepdims"]
    axes = list(range(x.ndim)) if axis is None else [axis % x.ndim]
    count = None
    for a in axes:
        count = x.shape[a] if count is None else count * x.shape[a]
    middle = E.floordiv(count - 1, 2) if count is not None else E.IntImm(0)

    def position(index):
        """Row-major position of ``index`` within the reduced axes."""
        flat = None
        for a in axes:
            flat = index[a] if flat is None else flat * x.shape[a] + index[a]
        return flat if flat is not None else E.IntImm(0)

    def rank_body(*i):
        js = [reduce_axis(x.shape[a], f"j{a}") for a in axes]
        other_index = list(i)
        for a, j in zip(axes, js):
            other_index[a] = j.var
        other, mine = x[tuple(other_index)], x[i]
        tie = E.And(E.Not(_less(other, mine)), E.Not(_less(mine, other)))
        before = E.Or(_less(other, mine), E.And(tie, E.LT(position(other_index), position(i))))
        return reduce_sum(E.select(before, E.IntImm(1), E.IntImm(0)), js)

    rank = compute(x.shape, rank_body, "T_rank", "int64")

    def full_index(p, rs):
        """The input index of output position ``p`` with the reduced axes at ``rs``."""
        kept = [p[a] for a in range(x.ndim) if a not in axes] if keepdims else list(p)
        it, index = iter(kept), []
        by_axis = dict(zip(axes, rs))
        for a in range(x.ndim):
            index.append(by_axis[a] if a in by_axis else next(it))
        return tuple(index)

    def picked(value_of, dtype):
        def body(*p):
            rs = [reduce_axis(x.shape[a], f"i{a}") for a in axes]
            index = full_index(p, [r.var for r in rs])
            return reduce_sum(E.select(E.EQ(rank[index], middle), value_of(index),
                                       E.const(0, dtype)), rs)
        return body

    shape = te.out_shape(None if axis is None else 0)
    values = compute(shape, picked(lambda index: x[index], x.dtype), "T_median", x.dtype)
    if axis is None:
        return te.emit("median", values)
    indices = compute(shape, picked(lambda index: E.cast("int64", index[axes[0]]), "int64"),
                      "T_median_indices", "int64")
    return te.emit("median", [values, indices])
