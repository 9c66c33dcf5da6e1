"""``R.collapse_sum_to`` / ``collapse_sum_like``: one reduction over the leading dims
and the dims the target has as 1. A dim deduction could not decide (the target
is 1 or equal to the data's dim only at run time) reduces under a guard."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_sum

from .registry import register_legalize


def _collapse(ctx, call):
    if call.struct_info.shape is None or call.args[0].struct_info.shape is None:
        return None
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    out_shape = te.out_shape()
    lead = data.ndim - len(out_shape)

    def body(*out):
        raxes = [reduce_axis(d, f"k{i}") for i, d in enumerate(data.shape[:lead])]
        index = [r.var for r in raxes]
        guards = []
        for i, want in enumerate(out_shape):
            have = data.shape[lead + i]
            if te.analyzer.can_prove_equal(want, have):
                index.append(out[i])
                continue
            k = reduce_axis(have, f"c{i}")
            raxes.append(k)
            index.append(k.var)
            if not te.is_one(want):   # summed only where the target is 1 at run time
                guards.append(E.Or(E.EQ(want, E.IntImm(1)), E.EQ(k.var, out[i])))
        value = data[tuple(index)]
        for guard in guards:
            value = E.select(guard, value, E.const(0, data.dtype))
        return reduce_sum(value, raxes)

    return te.emit("collapse_sum", compute(out_shape, body, "T_collapse_sum", data.dtype))


register_legalize("relax.collapse_sum_to")(_collapse)
register_legalize("relax.collapse_sum_like")(_collapse)
