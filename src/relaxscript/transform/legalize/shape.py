"""``R.shape_to_tensor`` of a shape whose values are known symbolically: a kernel
writing each value (the symbolic vars enter as ``tir_vars``). ``tensor_to_shape``
makes a shape value, which lives in the VM, and stays a call."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from ...struct_info import ShapeStructInfo
from .registry import register_legalize


@register_legalize("relax.shape_to_tensor")
def _shape_to_tensor(ctx, call):
    sinfo = call.args[0].struct_info
    if not isinstance(sinfo, ShapeStructInfo) or sinfo.values is None:
        return None
    te = ctx.te(call)
    values = [E.cast("int64", te.expr(v)) for v in sinfo.values]

    def body(i):
        value = values[-1] if values else E.IntImm(0)
        for position in range(len(values) - 2, -1, -1):
            value = E.select(E.EQ(i, position), values[position], value)
        return value

    return te.emit("shape_to_tensor", compute(te.out_shape(), body, "T_shape", "int64"))
