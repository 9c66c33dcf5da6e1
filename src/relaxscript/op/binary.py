"""Elementwise binary operators with NumPy broadcasting, comparisons and ``where``.

Operands of arithmetic and comparisons must have one dtype (as in TVMScript;
insert ``R.astype`` to mix), except that a Python number adopts the dtype of
the other operand when the call is built. Comparisons and logical operators
give bool. Integer ``divide`` truncates toward zero (C/TensorIR semantics);
``floor_divide`` / ``floor_mod`` follow NumPy's ``//`` and ``%``.
"""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, dtype_of, make_call
from ._infer_util import broadcast_shapes, format_sinfo, same_dtype, tensor_arg, tensor_from
from .registry import register_op


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):
        quotient = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -quotient, quotient)
    return np.true_divide(a, b)


_ARITH = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": _divide,
    "floor_divide": np.floor_divide, "floor_mod": np.mod, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
_COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
}
_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
            "logical_xor": np.logical_xor}


def infer_binary(call, ctx, result: str) -> TensorStructInfo:
    """``result``: "same" keeps the common dtype, "bool" gives bool ("logical" skips the dtype check)."""
    a, b = tensor_arg(call, 0, ctx), tensor_arg(call, 1, ctx)
    dtype = "bool" if result == "logical" else same_dtype(ctx, call, [a, b])
    if result == "bool":
        dtype = "bool"
    return tensor_from(broadcast_shapes(ctx, call, [a, b]), dtype)


def _operands(a, b):
    a_expr = as_tensor(a, dtype_of(b))
    return a_expr, as_tensor(b, dtype_of(a_expr))


def _make_binary(name: str, fn, result: str):
    op_name = "relax." + name

    def constructor(a, b):
        return make_call(op_name, list(_operands(a, b)))

    def reference(a, b):
        out = fn(np.asarray(a), np.asarray(b))
        return np.asarray(out, dtype=np.bool_ if result != "same" else np.asarray(a).dtype)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(a, b): elementwise {name} with NumPy broadcasting."
    register_op(op_name, lambda call, ctx: infer_binary(call, ctx, result), reference,
                constructor=constructor)
    return constructor


for _table, _result in ((_ARITH, "same"), (_COMPARE, "bool"), (_LOGICAL, "logical")):
    for _name, _fn in _table.items():
        globals()[_name] = _make_binary(_name, _fn, _result)


# ---------------------------------------------------------------- where
def where(condition, x1, x2):
    """R.where(condition, x1, x2): pick from x1 where condition holds, else x2 (broadcast)."""
    x1_expr, x2_expr = _operands(x1, x2)
    return make_call("relax.where", [as_tensor(condition, "bool"), x1_expr, x2_expr])


def _infer_where(call, ctx) -> TensorStructInfo:
    cond, a, b = (tensor_arg(call, i, ctx) for i in range(3))
    if cond.dtype is not None and cond.dtype != "bool":
        ctx.error(f"relax.where: condition must be a bool tensor, got {format_sinfo(cond)}")
    return tensor_from(broadcast_shapes(ctx, call, [cond, a, b]), same_dtype(ctx, call, [a, b]))


def _where_reference(condition, x1, x2):
    return np.where(condition, x1, x2).astype(np.asarray(x1).dtype)


register_op("relax.where", _infer_where, _where_reference, constructor=where)

__all__ = [*_ARITH, *_COMPARE, *_LOGICAL, "where"]
