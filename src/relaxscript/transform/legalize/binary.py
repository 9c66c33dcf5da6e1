"""Elementwise binary ops with NumPy broadcasting, comparisons, logical ops and ``where``."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from .common import broadcast_index, op_short_name, truthy
from .registry import register_legalize

_BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,          # true division for floats, truncating for integers
    "floor_divide": E.floordiv,
    "floor_mod": E.floormod,
    "power": lambda a, b: E.call_intrin("pow", a, b),
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
}


def _make_binary(fn):
    def legalize(ctx, call):
        te = ctx.te(call)
        a = te.placeholder(call.args[0], "a")
        b = te.placeholder(call.args[1], "b")
        name = op_short_name(call)

        def body(*idx):
            return fn(a[broadcast_index(te, a.shape, idx)], b[broadcast_index(te, b.shape, idx)])

        return te.emit(name, compute(te.out_shape(), body, "T_" + name, te.out_dtype()))
    return legalize


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
