"""Elementwise binary ops with NumPy broadcasting, comparisons, logical ops and ``where``.

An ``R.Prim`` operand whose symbolic value is known (``R.prim_value(n + 1)``)
enters the kernel as that expression of the kernel's symbolic vars; one known
only at run time (a float parameter) keeps the call, which the VM runs through
the op's NumPy reference, as is an op on two scalars.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E

from ...struct_info import PrimStructInfo
from tensorir.compute import compute

from .common import broadcast_index, op_short_name, truthy
from .registry import register_legalize

def _intrin2(name: str):
    return lambda a, b: E.call_intrin(name, a, b)


_BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,          # true division for floats, truncating for integers
    "floor_divide": E.floordiv,
    "floor_mod": E.floormod,
    # the truncating division's remainder: C's % for integers, fmod for floats
    "mod": lambda a, b: E.call_intrin("fmod", a, b) if a.dtype.startswith(("float", "bfloat"))
    else a - E.div(a, b) * b,
    # integers: exact, wrapping as NumPy's (T.pow on integers computes in float32)
    "power": lambda a, b: E.call_intrin(E.INTEGER_POWER if dt.is_int(a.dtype) and dt.is_int(b.dtype) else "pow",
                                        a, b),
    "maximum": E.max_,
    "minimum": E.min_,
    "equal": E.EQ,
    "not_equal": E.NE,
    "less": E.LT,
    "less_equal": E.LE,
    "greater": E.GT,
    "greater_equal": E.GE,
    "logical_and": lambda a, b: E.And(truthy(a), truthy(b)),
    "logical_or": lambda a, b: E.Or(truthy(a), truthy(b)),
    "logical_xor": lambda a, b: E.NE(truthy(a), truthy(b)),
    **{name: _intrin2(intrin)
       for name, intrin in (("bitwise_and", "bitwise_and"), ("bitwise_or", "bitwise_or"),
                            ("bitwise_xor", "bitwise_xor"), ("left_shift", "shift_left"),
                            ("right_shift", "shift_right"))},
}


def _make_binary(fn):
    def legalize(ctx, call):
        if isinstance(call.struct_info, PrimStructInfo):
            return None
        te = ctx.te(call)
        a = _operand(te, call.args[0], "a")
        b = _operand(te, call.args[1], "b")
        name = op_short_name(call)

        def body(*idx):
            return fn(_element(te, a, idx), _element(te, b, idx))

        return te.emit(name, compute(te.out_shape(), body, "T_" + name, te.out_dtype()))
    return legalize


def _operand(te, arg, name: str):
    """A loop-level tensor, or for an R.Prim the scalar expression in the kernel's vars."""
    sinfo = arg.struct_info
    if isinstance(sinfo, PrimStructInfo):
        return E.cast(sinfo.dtype, te.expr(sinfo.value))
    return te.placeholder(arg, name)


def _element(te, operand, idx):
    if isinstance(operand, E.PrimExpr):
        return operand
    return operand[broadcast_index(te, operand.shape, idx)]


for _name, _fn in _BINARY.items():
    register_legalize("relax." + _name)(_make_binary(_fn))


@register_legalize("relax.where")
def _where(ctx, call):
    te = ctx.te(call)
    cond, x1, x2 = (te.placeholder(arg, nm) for arg, nm in zip(call.args, ("cond", "x1", "x2")))

    def body(*idx):
        return E.Select(truthy(cond[broadcast_index(te, cond.shape, idx)]),
                        x1[broadcast_index(te, x1.shape, idx)], x2[broadcast_index(te, x2.shape, idx)])

    return te.emit("where", compute(te.out_shape(), body, "T_where", te.out_dtype()))
