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
