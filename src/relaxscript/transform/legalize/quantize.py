"""``R.dequantize``: one spatial block computing each value from its block's codes and scales.

The block is injective (it reads ``data[f(r), c]``, ``scale[r // 32, c]``), so FuseOps
puts it in front of its consumer as a prologue, and the schedule rules inline it
into the consumer's loop (``tensorir.schedule_rules.quantized``): the float32
matrix is never stored.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import compute

from ...quantization.activations import CODE_LIMIT, SCALE_PER_AMAX, activation_block
from ...quantization.formats import get_format
from .registry import register_legalize


def code_of(fmt, data, r, c) -> E.PrimExpr:
    """The integer code of row ``r``, column ``c`` (int32), from the packed ``data`` buffer."""
    if fmt.codes_per_byte == 1:
        return E.cast("int32", data[r, c])
    half = fmt.block // 2
    byte = E.cast("int32", data[E.floordiv(r, fmt.block) * half + E.floormod(r, half), c])
    low, high = E.floormod(byte, 16), E.floordiv(byte, 16)
    # the block's first half of rows is in the low nibbles, its second half in the high ones;
    # picked arithmetically (upper is 0 or 1), not with a select: a select next to the scale
    # conversions made gcc's if-conversion give up and leave the loop scalar
    upper = E.cast("int32", E.floordiv(E.floormod(r, fmt.block), half))
    return low + (high - low) * upper


@register_legalize("relax.dequantize")
def _dequantize(ctx, call):
    fmt = get_format(call.attrs["format"])
    te = ctx.te(call)
    data = te.placeholder(call.args[0], "data")
    scale = te.placeholder(call.args[1], "scale")
    minimum = te.placeholder(call.args[2], "minimum") if fmt.has_min else None

    def body(r, c):
        block = E.floordiv(r, fmt.block)
        code = code_of(fmt, data, r, c)
        if fmt.code_offset:
            code = code + fmt.code_offset
        value = E.cast("float32", code) * E.cast("float32", scale[block, c])
        return value + E.cast("float32", minimum[block, c]) if minimum is not None else value

    return te.emit(f"dequantize_{fmt.name}", compute(te.out_shape(), body, f"T_dequantize_{fmt.name}", "float32"))


def fake_quantize_value(load, last, block: int) -> E.PrimExpr:
    """``x[..., last]`` rounded to its block's 8-bit code, as float32: ``load(j)`` reads ``x`` at
    last-axis index ``j``. The block's ``max |x|`` is written out over its 32 values, so the
    op stays one injective block (FuseOps puts it in front of the matmul like a dequantize)."""
    start = E.floordiv(last, block) * block
    amax = E.call_intrin("abs", load(start))
    for offset in range(1, block):
        amax = E.max_(amax, E.call_intrin("abs", load(start + offset)))
    limit, zero = E.const(float(CODE_LIMIT), "float32"), E.const(0.0, "float32")
    inverse = E.Select(E.GT(amax, zero), limit / amax, zero)
    code = E.call_intrin("round", load(last) * inverse)
    return code * (amax * E.const(SCALE_PER_AMAX, "float32"))


@register_legalize("relax.fake_quantize")
def _fake_quantize(ctx, call):
    fmt = call.attrs["format"]
    block = activation_block(fmt)
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")

    def body(*indices):
        *lead, last = indices
        return fake_quantize_value(lambda j: x[(*lead, j)], last, block)

    return te.emit(f"fake_quantize_{fmt}", compute(te.out_shape(), body, f"T_fake_quantize_{fmt}", "float32"))


def _qdq_param(te, tensor, x, idx, axis):
    """A scalar or per-axis scale / zero point at output index ``idx``."""
    if tensor.ndim == 0:
        return tensor[()]
    if x.ndim == 0 or te.is_one(tensor.shape[0]):
        return tensor[(E.IntImm(0),)]
    return tensor[(idx[axis % x.ndim],)]


def _clip_cast(value, dtype: str):
    if dt.is_int(dtype):
        lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
        value = E.max_(E.min_(value, E.const(float(hi), "float32")), E.const(float(lo), "float32"))
    return E.cast(dtype, value)


def _affine_operands(ctx, call):
    """(te, data, scale, zero_point, axis, out_dtype) of an affine quantize or dequantize call."""
    te = ctx.te(call)
    return (te, te.placeholder(call.args[0], "data"), te.placeholder(call.args[1], "scale"),
            te.placeholder(call.args[2], "zero_point"), call.attrs["axis"], call.attrs["out_dtype"])


@register_legalize("relax.quantize")
def _quantize_affine(ctx, call):
    te, x, scale, zp, axis, out_dtype = _affine_operands(ctx, call)

    def body(*idx):
        scaled = E.cast("float32", x[idx]) / E.cast("float32", _qdq_param(te, scale, x, idx, axis))
        if dt.is_int(out_dtype):   # half away from zero, as the reference
            floor = E.call_intrin("floor", E.call_intrin("abs", scaled) + E.const(0.5, "float32"))
            scaled = E.select(E.LT(scaled, E.const(0.0, "float32")),
                              E.const(0.0, "float32") - floor, floor)
        return _clip_cast(scaled + E.cast("float32", _qdq_param(te, zp, x, idx, axis)), out_dtype)

    return te.emit("quantize", compute(x.shape, body, "T_quantize", out_dtype))


@register_legalize("relax.dequantize_affine")
def _dequantize_affine(ctx, call):
    te, x, scale, zp, axis, out_dtype = _affine_operands(ctx, call)

    def body(*idx):
        diff = E.cast("int32", x[idx]) - E.cast("int32", _qdq_param(te, zp, x, idx, axis))
        value = E.cast("float32", diff) * E.cast("float32", _qdq_param(te, scale, x, idx, axis))
        return _clip_cast(value, out_dtype)

    return te.emit("dequantize", compute(x.shape, body, "T_dequantize", out_dtype))
