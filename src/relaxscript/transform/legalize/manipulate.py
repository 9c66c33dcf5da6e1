"""Shape manipulation: reshape, flatten, permute_dims, expand_dims, squeeze,
broadcast_to, repeat, tile. Each output element reads one input element."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from ...op.manipulate import static_unit_dims
from .common import flat_index, normalize_axes, op_short_name, unravel
from .registry import register_legalize


def _gather(ctx, call, index_of):
    """Output element ``idx`` = ``x[index_of(te, x, idx)]``."""
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    name = op_short_name(call)
    out_shape = te.out_shape()

    def body(*idx):
        te.bind_loops(idx, out_shape)
        return x[tuple(index_of(te, x, idx, out_shape))]

    return te.emit(name, compute(out_shape, body, "T_" + name, te.out_dtype()))


def _reshape_index(te, x, idx, out_shape):
    position = flat_index(idx, out_shape)
    return [te.simplify(i) for i in unravel(position, x.shape)]


register_legalize("relax.reshape")(lambda ctx, call: _gather(ctx, call, _reshape_index))
register_legalize("relax.flatten")(lambda ctx, call: _gather(ctx, call, _reshape_index))


@register_legalize("relax.permute_dims")
def _permute_dims(ctx, call):
    def index_of(te, x, idx, out_shape):
        axes = call.attrs.get("axes")
        axes = list(range(x.ndim - 1, -1, -1)) if axes is None else [a % x.ndim for a in axes]
        index = [None] * x.ndim
        for out_pos, in_axis in enumerate(axes):
            index[in_axis] = idx[out_pos]
        return index
    return _gather(ctx, call, index_of)


@register_legalize("relax.expand_dims")
def _expand_dims(ctx, call):
    def index_of(te, x, idx, out_shape):
        inserted = set(normalize_axes(call.attrs["axis"], len(out_shape)))
        return [v for i, v in enumerate(idx) if i not in inserted]
    return _gather(ctx, call, index_of)


@register_legalize("relax.squeeze")
def _squeeze(ctx, call):
    def index_of(te, x, idx, out_shape):
        # without axes, the dims the annotation holds as the literal 1 (static_unit_dims)
        dropped = set(normalize_axes(static_unit_dims(call), x.ndim))
        kept = iter(idx)
        return [E.IntImm(0) if i in dropped else next(kept) for i in range(x.ndim)]
    return _gather(ctx, call, index_of)


@register_legalize("relax.broadcast_to")
def _broadcast_to(ctx, call):
    def index_of(te, x, idx, out_shape):
        offset = len(out_shape) - x.ndim
        index = []
        for i, dim in enumerate(x.shape):
            target, out_i = out_shape[offset + i], idx[offset + i]
            if te.is_one(dim):
                index.append(E.IntImm(0))
            elif te.analyzer.can_prove_equal(dim, target):
                index.append(out_i)
            else:  # deduction could not decide: the dim is 1 or the target at run time
                index.append(E.Select(E.EQ(dim, E.IntImm(1)), E.IntImm(0), out_i))
        return index
    return _gather(ctx, call, index_of)


@register_legalize("relax.repeat")
def _repeat(ctx, call):
    def index_of(te, x, idx, out_shape):
        repeats, axis = call.attrs["repeats"], call.attrs.get("axis")
        if axis is None:  # repeat the flattened input
            return [te.simplify(i) for i in unravel(idx[0] // repeats, x.shape)]
        axis %= x.ndim
        return [v // repeats if i == axis else v for i, v in enumerate(idx)]
    return _gather(ctx, call, index_of)


@register_legalize("relax.tile")
def _tile(ctx, call):
    def index_of(te, x, idx, out_shape):
        offset = len(out_shape) - x.ndim
        return [E.IntImm(0) if te.is_one(d) else te.simplify(idx[offset + i] % d)
                for i, d in enumerate(x.shape)]
    return _gather(ctx, call, index_of)
