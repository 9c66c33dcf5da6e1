"""``R.matmul`` with NumPy semantics: batched, broadcast batch dims, 1-D operands."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_sum

from .common import broadcast_index
from .registry import register_legalize


@register_legalize("relax.matmul")
def _matmul(ctx, call):
    te = ctx.te(call)
    a = te.placeholder(call.args[0], "A")
    b = te.placeholder(call.args[1], "B")
    dtype = te.out_dtype()
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    k = reduce_axis(a.shape[-1], "k")
    a_batch = list(a.shape[:-2])
    b_batch = list(b.shape[:-2])
    out_shape = te.out_shape()
    n_batch = len(out_shape) - (not a_vec) - (not b_vec)

    def body(*idx):
        batch = idx[:n_batch]
        rest = list(idx[n_batch:])
        row = [] if a_vec else [rest.pop(0)]
        col = [] if b_vec else [rest.pop(0)]
        a_index = (*broadcast_index(te, a_batch, batch), *row, k.var)
        b_index = (*broadcast_index(te, b_batch, batch), k.var, *col)
        # out_dtype (when given) is the dtype NumPy would multiply in
        return reduce_sum(E.cast(dtype, a[a_index]) * E.cast(dtype, b[b_index]), [k])

    return te.emit("matmul", compute(out_shape, body, "T_matmul", dtype))
