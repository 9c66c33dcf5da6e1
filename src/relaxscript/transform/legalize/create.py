"""Creation ops: full/zeros/ones (and ``*_like``), arange, triu/tril.

``*_like`` ops do not pass their template tensor: only its (symbolic) shape
matters, which the output annotation carries.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import compute

from .common import op_short_name
from .registry import register_legalize


def _filled(ctx, call, fill_arg: int | None, constant=None):
    te = ctx.te(call)
    dtype = te.out_dtype()
    name = op_short_name(call)
    if fill_arg is not None:
        fill = te.placeholder(call.args[fill_arg], "fill_value")
        value = lambda *idx: E.cast(dtype, fill[()])  # noqa: E731
    else:
        value = lambda *idx: E.const(constant, dtype)  # noqa: E731
    return te.emit(name, compute(te.out_shape(), value, "T_" + name, dtype))


register_legalize("relax.full")(lambda ctx, call: _filled(ctx, call, 1))
register_legalize("relax.full_like")(lambda ctx, call: _filled(ctx, call, 1))
for _name, _value in (("zeros", 0), ("ones", 1)):
    register_legalize("relax." + _name)(lambda ctx, call, v=_value: _filled(ctx, call, None, v))
    register_legalize(f"relax.{_name}_like")(lambda ctx, call, v=_value: _filled(ctx, call, None, v))


@register_legalize("relax.arange")
def _arange(ctx, call):
    te = ctx.te(call)
    dtype = te.out_dtype()
    start, _, step = (te.expr(arg.struct_info.value) for arg in call.args)
    compute_in = dtype if dt.is_float(dtype) else "int64"

    def body(i):
        return E.cast(compute_in, start) + E.cast(compute_in, i) * E.cast(compute_in, step)

    return te.emit("arange", compute(te.out_shape(), body, "T_arange", dtype))


def _make_triangle(keep):
    def legalize(ctx, call):
        te = ctx.te(call)
        x = te.placeholder(call.args[0], "x")
        k = call.attrs["k"]
        name = op_short_name(call)

        def body(*idx):
            diagonal = idx[-1] - idx[-2]
            return E.Select(keep(diagonal, k), x[idx], E.const(0, x.dtype))

        return te.emit(name, compute(te.out_shape(), body, "T_" + name, x.dtype))
    return legalize


register_legalize("relax.triu")(_make_triangle(lambda d, k: E.GE(d, k)))
register_legalize("relax.tril")(_make_triangle(lambda d, k: E.LE(d, k)))
