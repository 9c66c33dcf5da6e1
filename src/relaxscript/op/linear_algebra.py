"""``R.matmul``, ``R.einsum`` and ``R.linear``. ``matmul`` has NumPy semantics: 1-D operands are promoted to a row
(left) or a column (right) and the added dim is removed again; batch dims
broadcast. Mismatched contraction dims are an error when provable and a
run-time check otherwise. Operands share a dtype unless ``out_dtype`` is given.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo, TupleStructInfo
from ._convert import as_tensor, as_tuple, make_call
from ._infer_util import (broadcast_shapes, format_sinfo, optional_attr_dtype, prove_not_equal,
                          same_dtype, sinfo_of, tensor_arg)
from .registry import OpAttributeError, register_op


def matmul(a, b, out_dtype=None):
    """R.matmul(a, b, out_dtype=None): matrix product (``a @ b``)."""
    out_dtype = optional_attr_dtype(out_dtype, "matmul")  # TVM prints "void" for none given
    return make_call("relax.matmul", [as_tensor(a), as_tensor(b)], {"out_dtype": out_dtype})


def _infer_matmul(call, ctx) -> TensorStructInfo:
    a, b = tensor_arg(call, 0, ctx), tensor_arg(call, 1, ctx)
    out_dtype = call.attrs.get("out_dtype")
    dtype = out_dtype or same_dtype(ctx, call, [a, b])
    if a.ndim == 0 or b.ndim == 0:
        ctx.error(f"relax.matmul: operands must have at least one dimension, got "
                  f"{format_sinfo(a)} and {format_sinfo(b)}")
    if a.ndim < 0 or b.ndim < 0:
        return TensorStructInfo(None, dtype)
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, out_ndim)
    a_shape = (E.IntImm(1), *a.shape) if a.ndim == 1 else a.shape
    b_shape = (*b.shape, E.IntImm(1)) if b.ndim == 1 else b.shape
    if prove_not_equal(ctx, a_shape[-1], b_shape[-2]):
        ctx.error(f"relax.matmul: contraction dims differ: {format_sinfo(a)} @ {format_sinfo(b)}")
    batch = broadcast_shapes(ctx, call, [TensorStructInfo(a_shape[:-2]), TensorStructInfo(b_shape[:-2])])
    if isinstance(batch, int):
        return TensorStructInfo(None, dtype, out_ndim)
    rows = [a_shape[-2]] if a.ndim > 1 else []
    cols = [b_shape[-1]] if b.ndim > 1 else []
    return TensorStructInfo([*batch, *rows, *cols], dtype)


def _matmul_reference(a, b, out_dtype=None):
    dtype = out_dtype or np.result_type(a, b).name
    return np.asarray(np.matmul(a.astype(dtype), b.astype(dtype)), dtype=dtype)


register_op("relax.matmul", _infer_matmul, _matmul_reference, attr_names=("out_dtype",),
            constructor=matmul)

__all__ = ["matmul"]


# ---------------------------------------------------------------- linear
def linear(data, weight, bias=None, out_dtype=None):
    """R.linear(data, weight, bias=None, out_dtype=None): ``data @ weight.T + bias``.

    Not an operator of its own (as in TVM): it builds the permute_dims, matmul and
    add calls, which the normalizer binds one by one."""
    from .binary import add
    from .manipulate import permute_dims
    out = matmul(data, permute_dims(weight), out_dtype)
    return out if bias is None else add(out, bias)


# ---------------------------------------------------------------- einsum
def _einsum_terms(subscripts: str, op: str = "einsum"):
    """``"ij,jk->ik"`` as ([["i","j"], ["j","k"]], ["i","k"] or None); "..." is one token."""
    if not isinstance(subscripts, str):
        raise OpAttributeError(f"R.{op}: subscripts must be a string, got {subscripts!r}")
    text = subscripts.replace(" ", "")
    if text.count("->") > 1:
        raise OpAttributeError(f"R.{op}: subscripts {subscripts!r} have more than one '->'")
    lhs, _, rhs = text.partition("->")

    def labels(term: str) -> list[str]:
        out, i = [], 0
        while i < len(term):
            if term.startswith("...", i):
                if "..." in out:
                    raise OpAttributeError(f"R.{op}: term {term!r} has two ellipses")
                out.append("...")
                i += 3
            elif term[i].isalpha():
                out.append(term[i])
                i += 1
            else:
                raise OpAttributeError(f"R.{op}: unexpected {term[i]!r} in subscripts {subscripts!r}")
        return out

    inputs = [labels(t) for t in lhs.split(",")]
    if "->" not in text:
        counts: dict[str, int] = {}
        for term in inputs:
            for lb in term:
                counts[lb] = counts.get(lb, 0) + 1
        ellipsis = ["..."] if "..." in counts else []
        return inputs, ellipsis + sorted(lb for lb, c in counts.items() if c == 1 and lb != "...")
    output = labels(rhs)
    seen = {lb for term in inputs for lb in term}
    for lb in output:
        if lb not in seen:
            raise OpAttributeError(f"R.{op}: output label {lb!r} appears in no input of {subscripts!r}")
    if len(set(output)) != len(output):
        raise OpAttributeError(f"R.{op}: output of {subscripts!r} repeats a label")
    return inputs, output


def einsum(operands, subscripts: str):
    """R.einsum(operands, subscripts): NumPy's einsum of a tuple of tensors."""
    _einsum_terms(subscripts)
    return make_call("relax.einsum", [as_tuple(operands)], {"subscripts": subscripts})


def einsum_dims(ctx, call, terms, tensors):
    """Label -> dim and the ellipsis shape, broadcast over operands (None when undecided)."""
    by_label: dict[str, list] = {}
    ellipses = []
    for term, t in zip(terms, tensors):
        fixed = len(term) - ("..." in term)
        if ("..." in term and t.ndim < fixed) or ("..." not in term and t.ndim != fixed):
            ctx.error(f"relax.einsum: term {''.join(term)!r} does not fit {format_sinfo(t)}")
        dims = list(t.shape)
        for lb in term:
            if lb == "...":
                count = t.ndim - fixed
                ellipses.append(TensorStructInfo(dims[:count]))
                dims = dims[count:]
            else:
                by_label.setdefault(lb, []).append(dims.pop(0))
    out = {}
    for lb, dims in by_label.items():
        dim = broadcast_shapes(ctx, call, [TensorStructInfo([d]) for d in dims])
        out[lb] = None if isinstance(dim, int) else dim[0]
    ellipsis = broadcast_shapes(ctx, call, ellipses) if ellipses else []
    return out, (None if isinstance(ellipsis, int) else list(ellipsis))


def _infer_einsum(call, ctx) -> TensorStructInfo:
    fields = sinfo_of(call.args[0])
    if not isinstance(fields, TupleStructInfo) or not fields.fields or not all(
            isinstance(t, TensorStructInfo) for t in fields.fields):
        ctx.error(f"relax.einsum expects a non-empty tuple of tensors, got {format_sinfo(fields)}")
    tensors = list(fields.fields)
    dtype = same_dtype(ctx, call, tensors)
    terms, output = _einsum_terms(call.attrs["subscripts"])
    if len(terms) != len(tensors):
        ctx.error(f"relax.einsum: subscripts {call.attrs['subscripts']!r} name {len(terms)} "
                  f"operands, got {len(tensors)}")
    if any(t.shape is None for t in tensors):
        if "..." in output:
            return TensorStructInfo(None, dtype)
        return TensorStructInfo(None, dtype, len(output))
    dims, ellipsis = einsum_dims(ctx, call, terms, tensors)
    shape = []
    for lb in output:
        if lb == "...":
            if ellipsis is None:
                return TensorStructInfo(None, dtype)
            shape += ellipsis
        elif dims[lb] is None:
            return TensorStructInfo(None, dtype, len(output) - ("..." in output))
        else:
            shape.append(dims[lb])
    return TensorStructInfo(shape, dtype)


def _einsum_reference(operands, subscripts):
    operands = list(operands)
    return np.asarray(np.einsum(subscripts, *operands), dtype=operands[0].dtype)


register_op("relax.einsum", _infer_einsum, _einsum_reference, attr_names=("subscripts",),
            constructor=einsum)

__all__ += ["linear", "einsum"]
