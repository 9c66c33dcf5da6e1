"""``R.matmul`` with NumPy semantics (batched, broadcast batch dims, 1-D operands) and
``R.einsum``."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_sum

from ...op.linear_algebra import _einsum_terms
from .common import broadcast_index
from .index import _tuple_fields
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


@register_legalize("relax.einsum")
def _einsum(ctx, call):
    """One stage: the output's labels are loop vars, the others reduce vars; a unit dim of
    an operand reads index 0 (broadcast), as NumPy's einsum."""
    terms, output = _einsum_terms(call.attrs["subscripts"])
    te = ctx.te(call)
    parts = _tuple_fields(ctx, call.args[0])
    tensors = [te.placeholder(p, f"x{i}") for i, p in enumerate(parts)]
    dtype = te.out_dtype()
    out_shape = te.out_shape()
    # each label's extent: an operand dim that is not provably 1 (else 1)
    extent: dict[str, E.PrimExpr] = {}
    ellipsis_ndim = 0
    for term, t in zip(terms, tensors):
        dims = list(t.shape)
        for lb in term:
            if lb == "...":
                count = t.ndim - (len(term) - 1)
                ellipsis_ndim = max(ellipsis_ndim, count)
                dims = dims[count:]
                continue
            d = dims.pop(0)
            if lb not in extent or te.is_one(extent[lb]):
                extent[lb] = d
    summed = [lb for lb in extent if lb not in output]

    def body(*idx):
        var: dict[str, E.PrimExpr] = {}
        pos = 0
        ellipsis_index: list = []
        for lb in output:
            if lb == "...":
                ellipsis_index = list(idx[pos:pos + ellipsis_ndim])
                pos += ellipsis_ndim
            else:
                var[lb] = idx[pos]
                pos += 1
        raxes = [reduce_axis(extent[lb], f"k_{lb}") for lb in summed]
        var.update({lb: ax.var for lb, ax in zip(summed, raxes)})
        value = None
        for term, t in zip(terms, tensors):
            index, dims = [], list(t.shape)
            for lb in term:
                if lb == "...":
                    count = t.ndim - (len(term) - 1)
                    index += broadcast_index(te, dims[:count], ellipsis_index)
                    dims = dims[count:]
                    continue
                d = dims.pop(0)
                index.append(E.IntImm(0) if te.is_one(d) else var[lb])
            load = E.cast(dtype, t[tuple(index)])
            value = load if value is None else value * load
        return reduce_sum(value, raxes) if raxes else value

    return te.emit("einsum", compute(out_shape, body, "T_einsum", dtype))
