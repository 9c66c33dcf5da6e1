"""``R.matmul`` with NumPy semantics: 1-D operands are promoted to a row
(left) or a column (right) and the added dim is removed again; batch dims
broadcast. Mismatched contraction dims are an error when provable and a
run-time check otherwise. Operands share a dtype unless ``out_dtype`` is given.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import (attr_dtype, broadcast_shapes, format_sinfo, prove_not_equal, same_dtype,
                          tensor_arg)
from .registry import register_op


def matmul(a, b, out_dtype=None):
    """R.matmul(a, b, out_dtype=None): matrix product (``a @ b``)."""
    if out_dtype is not None:
        out_dtype = attr_dtype(out_dtype, "matmul", "out_dtype")
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
