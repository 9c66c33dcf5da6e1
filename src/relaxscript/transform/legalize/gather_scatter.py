"""Data-indexed ops: flip, one_hot, gather_nd, scatter_nd, scatter_elements, and cumsum.

Scatters are written in gather form: each output element searches the
updates aimed at it (``O(elements x updates)``), so a kernel never writes
through a data-dependent index. Every index read from data goes through
``T.checked_index`` (NumPy's negative indices; a value outside its axis is
an ``IndexOutOfRangeError`` on every target, as in the interpreter).
``cumsum`` sums a masked full row per element (``O(n^2)`` along the axis).
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_max, reduce_prod, reduce_sum

from ...struct_info import PrimStructInfo
from .common import op_short_name, product, unravel
from .registry import register_legalize


def _all(conditions):
    result = E.const(True, "bool")
    for c in conditions:
        result = E.And(result, c)
    return result


def _known(call) -> bool:
    return getattr(call.struct_info, "shape", None) is not None and all(
        getattr(a.struct_info, "shape", None) is not None for a in call.args
        if not isinstance(a.struct_info, PrimStructInfo))


@register_legalize("relax.flip")
def _flip(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    axis = call.attrs["axis"] % x.ndim

    def body(*i):
        return x[(*i[:axis], x.shape[axis] - 1 - i[axis], *i[axis + 1:])]

    return te.emit("flip", compute(x.shape, body, "T_flip"))


@register_legalize("relax.one_hot")
def _one_hot(ctx, call):
    on, off = call.args[1].struct_info, call.args[2].struct_info
    if on.value is None or off.value is None or not _known(call):
        return None   # values known only at run time: the VM runs the reference
    te = ctx.te(call)
    indices = te.placeholder(call.args[0], "indices")
    dtype = te.out_dtype()
    axis = call.attrs["axis"] % (indices.ndim + 1)
    on_value, off_value = E.cast(dtype, te.expr(on.value)), E.cast(dtype, te.expr(off.value))

    def body(*i):
        index = indices[(*i[:axis], *i[axis + 1:])]
        return E.select(E.EQ(E.cast("int64", index), i[axis]), on_value, off_value)

    return te.emit("one_hot", compute(te.out_shape(), body, "T_one_hot", dtype))


@register_legalize("relax.gather_nd")
def _gather_nd(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    indices = te.placeholder(call.args[1], "indices")
    batch = call.attrs["batch_dims"]
    depth = int(indices.shape[-1].value)

    def body(*i):
        lead = i[:indices.ndim - 1]
        picked = [E.checked_index(indices[(*lead, E.IntImm(d))], data.shape[batch + d]) for d in range(depth)]
        return data[(*lead[:batch], *picked, *i[indices.ndim - 1:])]

    return te.emit("gather_nd", compute(te.out_shape(), body, "T_gather_nd"))


_COMBINE = {"add": (reduce_sum, lambda a, b: a + b), "max": (reduce_max, E.max_)}


def _scatter(te, data, updates, update_shape, aims_at, reduction, name):
    """``out[p] = data[p]`` combined with every update ``u`` for which ``aims_at(p, u)``."""
    def matching(body_of):
        def body(*p):
            us = [reduce_axis(d, f"u{k}") for k, d in enumerate(update_shape)]
            return body_of(p, [u.var for u in us], us)
        return body

    if reduction == "update":   # the last matching update (row-major order) wins
        flat_count = product(update_shape)

        def last(p, u, us):
            flat = E.IntImm(0)
            for index, dim in zip(u, update_shape):
                flat = flat * dim + index
            return reduce_max(E.select(aims_at(p, u), flat, E.IntImm(-1)), us)

        winner = compute(data.shape, matching(last), "T_last_update", "int64")

        def body(*p):
            w = winner[p]
            safe = E.max_(w, E.IntImm(0))
            return E.select(E.GE(w, 0), updates[unravel(safe, update_shape)], data[p])

        del flat_count
        return compute(data.shape, body, name)
    if reduction == "mul":   # no product reduction over a guarded source: sum of logs is
        # inexact, so multiply the matching updates with a product reduction
        from tensorir.compute import reduce_prod
        combined = compute(data.shape, matching(lambda p, u, us: reduce_prod(
            E.select(aims_at(p, u), updates[tuple(u)], E.const(1, data.dtype)), us)), "T_scatter_prod")
        return compute(data.shape, lambda *p: data[p] * combined[p], name)
    if reduction == "min":
        from tensorir.compute import max_value, reduce_min
        combined = compute(data.shape, matching(lambda p, u, us: reduce_min(
            E.select(aims_at(p, u), updates[tuple(u)], E.const(max_value(data.dtype), data.dtype)),
            us)), "T_scatter_min")
        return compute(data.shape, lambda *p: E.min_(data[p], combined[p]), name)
    if reduction == "max":
        from tensorir.compute import min_value
        combined = compute(data.shape, matching(lambda p, u, us: reduce_max(
            E.select(aims_at(p, u), updates[tuple(u)], E.const(min_value(data.dtype), data.dtype)),
            us)), "T_scatter_max")
        return compute(data.shape, lambda *p: E.max_(data[p], combined[p]), name)
    combined = compute(data.shape, matching(lambda p, u, us: reduce_sum(
        E.select(aims_at(p, u), updates[tuple(u)], E.const(0, data.dtype)), us)), "T_scatter_sum")
    return compute(data.shape, lambda *p: data[p] + combined[p], name)


@register_legalize("relax.scatter_nd")
def _scatter_nd(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    indices = te.placeholder(call.args[1], "indices")
    updates = te.placeholder(call.args[2], "updates")
    depth = int(indices.shape[-1].value)
    lead = indices.ndim - 1

    def aims_at(p, u):
        conds = [E.EQ(E.checked_index(indices[(*u[:lead], E.IntImm(d))], data.shape[d]), p[d])
                 for d in range(depth)]
        conds += [E.EQ(u[lead + k], p[depth + k]) for k in range(data.ndim - depth)]
        return _all(conds)

    out = _scatter(te, data, updates, updates.shape, aims_at, call.attrs["reduction"], "T_scatter_nd")
    return te.emit("scatter_nd", out)


@register_legalize("relax.scatter_elements")
def _scatter_elements(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    indices = te.placeholder(call.args[1], "indices")
    updates = te.placeholder(call.args[2], "updates")
    axis = call.attrs["axis"] % data.ndim

    def aims_at(p, u):
        conds = [E.EQ(E.checked_index(indices[tuple(u)], data.shape[axis]), p[axis])]
        conds += [E.EQ(u[d], p[d]) for d in range(data.ndim) if d != axis]
        return _all(conds)

    out = _scatter(te, data, updates, indices.shape, aims_at, call.attrs["reduction"],
                   "T_scatter_elements")
    return te.emit("scatter_elements", out)


@register_legalize("relax.cumsum")
@register_legalize("relax.cumprod")
def _cumulative(ctx, call):
    if not _known(call):
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "data")
    dtype = te.out_dtype()
    axis = call.attrs["axis"]
    exclusive = call.attrs["exclusive"]
    if axis is None:
        shape = [product(x.shape)]

        def element(i):
            return x[unravel(i, x.shape)]
        axis = 0
    else:
        shape = list(x.shape)
        axis %= x.ndim

        def element(*i):
            return x[i]

    def body(*i):
        k = reduce_axis(shape[axis], "k")
        keep = E.LT(k.var, i[axis]) if exclusive else E.LE(k.var, i[axis])
        source = element(*i[:axis], k.var, *i[axis + 1:])
        return combine(E.select(keep, E.cast(dtype, source), E.const(identity, dtype)), [k])

    name = op_short_name(call)
    combine, identity = (reduce_prod, 1) if name == "cumprod" else (reduce_sum, 0)
    return te.emit(name, compute(te.out_shape(), body, "T_" + name, dtype))


@register_legalize("relax.slice_scatter")
def _slice_scatter(ctx, call):
    """Each output element is ``src``'s element when its position along the axis is in the
    slice, else the input's (the ``src`` position is clamped so the unused load stays in
    bounds)."""
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    src = te.placeholder(call.args[1], "src")
    a = call.attrs
    axis = a["axis"] % x.ndim
    start, end, step = a["start"], a["end"], a["step"]

    def body(*idx):
        pos = idx[axis]
        offset = pos - start
        conds = [E.GE(pos, start)]
        if end is not None:
            conds.append(E.LT(pos, end))
        if step > 1:
            conds.append(E.EQ(E.floormod(offset, step), 0))
        inside = _all(conds)
        at = E.max_(E.min_(E.floordiv(offset, step), src.shape[axis] - 1), E.IntImm(0))
        return E.select(inside, src[(*idx[:axis], at, *idx[axis + 1:])], x[idx])

    return te.emit("slice_scatter", compute(te.out_shape(), body, "T_slice_scatter", x.dtype))


@register_legalize("relax.gather_elements")
def _gather_elements(ctx, call):
    """One load per output element; the index read from data goes through
    ``T.checked_index`` (negative from the end, out of range an error)."""
    if not _known(call):
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    indices = te.placeholder(call.args[1], "indices")
    axis = call.attrs["axis"] % data.ndim

    def body(*idx):
        picked = E.checked_index(indices[idx], data.shape[axis])
        return data[(*idx[:axis], picked, *idx[axis + 1:])]

    return te.emit("gather_elements", compute(te.out_shape(), body, "T_gather_elements",
                                              data.dtype))


class _Broadcast:
    """``values`` read at positions of a larger broadcast shape (NumPy's rule)."""

    def __init__(self, te, tensor):
        self.te, self.tensor = te, tensor

    def __getitem__(self, index):
        from .common import broadcast_index
        return self.tensor[broadcast_index(self.te, self.tensor.shape, tuple(index))]


@register_legalize("relax.index_put")
def _index_put(ctx, call):
    """Gather form, as the scatters: each output element takes the last matching write (or
    adds every matching one); the positions read from data go through ``T.checked_index``."""
    from .index import _tuple_fields
    if getattr(call.struct_info, "shape", None) is None:
        return None
    parts = _tuple_fields(ctx, call.args[1])
    if any(getattr(p.struct_info, "shape", None) is None for p in parts) \
            or call.args[2].struct_info.shape is None or call.args[0].struct_info.shape is None:
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    index_tensors = [te.placeholder(p, f"i{k}") for k, p in enumerate(parts)]
    values = te.placeholder(call.args[2], "values")
    ndim = max([t.ndim for t in index_tensors] + [0])
    shape = []
    for d in range(ndim):      # the indices' broadcast shape: the first non-unit extent
        extent = E.IntImm(1)
        for t in index_tensors:
            offset = ndim - t.ndim
            if d >= offset and not te.is_one(t.shape[d - offset]):
                extent = t.shape[d - offset]
                break
        shape.append(extent)
    broadcast = [_Broadcast(te, t) for t in index_tensors]

    def aims_at(p, u):
        return _all([E.EQ(E.checked_index(b[tuple(u)], data.shape[axis]), p[axis])
                     for axis, b in enumerate(broadcast)])

    reduction = "add" if call.attrs["accumulate"] else "update"
    out = _scatter(te, data, _Broadcast(te, values), shape, aims_at, reduction, "T_index_put")
    return te.emit("index_put", out)


@register_legalize("relax.multinomial_from_uniform")
def _multinomial_from_uniform(ctx, call):
    """Two stages: the running sums of each ``prob`` row (a masked row sum per element, as
    cumsum), then per sample the count of running sums at or below its uniform number (the
    first index past it), capped at the last index. The row index read from data goes
    through ``T.checked_index``."""
    if not _known(call):
        return None
    te = ctx.te(call)
    prob = te.placeholder(call.args[0], "prob")
    uniform = te.placeholder(call.args[1], "uniform_sample")
    indices = te.placeholder(call.args[2], "sample_indices")
    batch, vocab = prob.shape
    dtype = te.out_dtype()

    def running_sum(b, j):
        k = reduce_axis(vocab, "k")
        return reduce_sum(E.select(E.LE(k.var, j), prob[b, k.var], E.const(0, prob.dtype)), [k])

    running = compute([batch, vocab], running_sum, "T_running_sum", prob.dtype)

    def below(i, zero):
        row = E.checked_index(indices[i, zero], batch)
        j = reduce_axis(vocab, "j")
        at_or_below = E.LE(running[row, j.var], E.cast(prob.dtype, uniform[i, zero]))
        return reduce_sum(E.select(at_or_below, E.const(1, "int64"), E.const(0, "int64")), [j])

    count = compute(te.out_shape(), below, "T_below", "int64")
    out = compute(te.out_shape(), lambda i, zero: E.cast(dtype, E.min_(count[i, zero],
                                                                        E.cast("int64", vocab) - 1)),
                  "T_multinomial_from_uniform", dtype)
    return te.emit("multinomial_from_uniform", out)
