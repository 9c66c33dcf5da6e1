"""Elementwise binary operators with NumPy broadcasting, comparisons and ``where``.

Operands of arithmetic and comparisons must have one dtype (as in TVMScript;
insert ``R.astype`` to mix), except that a Python number adopts the dtype of
the other operand when the call is built. Either operand may be a scalar
``R.Prim`` value (TVMScript's ``R.add(x, y)`` with ``y: R.Prim("float32")``):
with a tensor it broadcasts as a 0-d tensor of its dtype; two scalars give a
scalar, whose symbolic value is deduced when both values are known integers. Comparisons and logical operators
give bool. Integer ``divide`` truncates toward zero (C/TensorIR semantics);
``floor_divide`` / ``floor_mod`` follow NumPy's ``//`` and ``%``.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import PrimStructInfo, TensorStructInfo
from ._convert import as_tensor, dtype_of, make_call
from ._infer_util import (broadcast_shapes, format_sinfo, same_dtype, sinfo_of, tensor_arg,
                          tensor_from)
from .registry import register_op


def _divide(a, b):
    if np.issubdtype(a.dtype, np.integer):   # truncating: the floor quotient moved up where inexact
        # (not |a| // |b|: the smallest integer's abs is itself, -128 // 8 gave 16 in int8)
        quotient = np.floor_divide(a, b)
        inexact = (np.mod(a, b) != 0) & ((a < 0) != (b < 0))
        return quotient + inexact.astype(quotient.dtype)
    return np.true_divide(a, b)


_ARITH = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": _divide,
    "floor_divide": np.floor_divide, "floor_mod": np.mod, "mod": np.fmod, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
_COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
}
_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
            "logical_xor": np.logical_xor}
# integer (or bool) operands only, dtype kept
_BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
            "left_shift": np.left_shift, "right_shift": np.right_shift}


# Symbolic value of an op on two known integer scalars (TIR's meaning: divide truncates).
_PRIM_VALUE = {
    "add": E.add, "subtract": E.sub, "multiply": E.mul, "divide": E.div,
    "floor_divide": E.floordiv, "floor_mod": E.floormod, "mod": lambda a, b: a - E.div(a, b) * b,
    "maximum": E.max_, "minimum": E.min_, "equal": E.EQ, "not_equal": E.NE, "less": E.LT,
    "less_equal": E.LE, "greater": E.GT, "greater_equal": E.GE,
}


def _operand(call, index: int, ctx) -> TensorStructInfo | PrimStructInfo:
    sinfo = sinfo_of(call.args[index])
    if isinstance(sinfo, PrimStructInfo):
        return sinfo
    return tensor_arg(call, index, ctx)


def _as_scalar_tensor(sinfo) -> TensorStructInfo:
    return TensorStructInfo((), sinfo.dtype) if isinstance(sinfo, PrimStructInfo) else sinfo


def _infer_prim_pair(call, ctx, a: PrimStructInfo, b: PrimStructInfo, result: str) -> PrimStructInfo:
    dtype = "bool" if result not in ("same", "int") else same_dtype(ctx, call, [a, b])
    if result == "int" and not (dt.is_int(dtype) or dt.is_bool(dtype)):
        ctx.error(f"{call.op.name} requires integer operands, got {format_sinfo(a)} and {format_sinfo(b)}")
    if result == "logical":
        return PrimStructInfo("bool")
    rule = _PRIM_VALUE.get(call.op.name[len("relax."):])
    value = None
    if rule is not None and a.value is not None and b.value is not None and dt.is_int(a.dtype):
        value = ctx.analyzer.simplify(rule(a.value, b.value))
    return PrimStructInfo(dtype, value)


def infer_binary(call, ctx, result: str) -> TensorStructInfo | PrimStructInfo:
    """``result``: "same" keeps the common dtype, "bool" gives bool ("logical" skips the dtype check)."""
    a, b = _operand(call, 0, ctx), _operand(call, 1, ctx)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo):
        return _infer_prim_pair(call, ctx, a, b, result)
    a, b = _as_scalar_tensor(a), _as_scalar_tensor(b)
    dtype = "bool" if result == "logical" else same_dtype(ctx, call, [a, b])
    if result == "int" and dtype is not None and not (dt.is_int(dtype) or dt.is_bool(dtype)):
        ctx.error(f"{call.op.name} requires integer operands, got {format_sinfo(a)} and {format_sinfo(b)}")
    if result == "bool":
        dtype = "bool"
    return tensor_from(broadcast_shapes(ctx, call, [a, b]), dtype)


def _operands(a, b):
    a_expr = as_tensor(a, dtype_of(b))
    return a_expr, as_tensor(b, dtype_of(a_expr))


_TENSOR_VALUES = (np.ndarray, np.generic)


def _scalar_reference(fn, a, b, result: str):
    """Two scalar operands (Python numbers, as the interpreter and VM hold R.Prim values): a
    Python number of the result's kind."""
    out = np.asarray(fn(np.asarray(a), np.asarray(b)))
    if result not in ("same", "int"):
        return bool(out)
    return float(out) if out.dtype.kind == "f" else int(out)


def _make_binary(name: str, fn, result: str):
    op_name = "relax." + name

    def constructor(a, b):
        return make_call(op_name, list(_operands(a, b)))

    def reference(a, b):
        # R.Prim values are Python numbers; tensors are arrays (a NumPy scalar is a 0-d one)
        if not isinstance(a, _TENSOR_VALUES) and not isinstance(b, _TENSOR_VALUES):
            return _scalar_reference(fn, a, b, result)
        # an R.Prim operand takes the tensor's dtype, as a 0-d tensor would
        if not isinstance(a, _TENSOR_VALUES):
            a = np.asarray(a, dtype=np.asarray(b).dtype)
        elif not isinstance(b, _TENSOR_VALUES):
            b = np.asarray(b, dtype=np.asarray(a).dtype)
        out = fn(np.asarray(a), np.asarray(b))
        return np.asarray(out, dtype=np.bool_ if result not in ("same", "int") else np.asarray(a).dtype)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(a, b): elementwise {name} with NumPy broadcasting."
    register_op(op_name, lambda call, ctx: infer_binary(call, ctx, result), reference,
                constructor=constructor)
    return constructor


for _table, _result in ((_ARITH, "same"), (_COMPARE, "bool"), (_LOGICAL, "logical"), (_BITWISE, "int")):
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

__all__ = [*_ARITH, *_COMPARE, *_LOGICAL, *_BITWISE, "where"]
