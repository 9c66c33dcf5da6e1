"""TVM's affine quantization ops: ``R.quantize(data, scale, zero_point, axis=-1,
out_dtype="int8")`` and ``R.dequantize(data, scale, zero_point, axis=-1,
out_dtype="float32")`` (ONNX's QuantizeLinear / DequantizeLinear).

``scale`` and ``zero_point`` are scalars (0-d) or 1-D along ``axis``.

- quantize: ``clip(round(data / scale) + zero_point)`` to ``out_dtype``'s range, rounding
  half away from zero (TVM's ``round``); a float ``out_dtype`` skips the rounding;
- dequantize: ``(data - zero_point) * scale`` (the difference in int32, the product in
  float32), clipped to ``out_dtype``'s range when that is not float32.

``R.dequantize`` with ``format=`` is the block-quantized weight op (``op/quantize.py``);
without it, it is this one, which is its own operator (``relax.dequantize_affine``,
printed as ``R.dequantize``) so that passes reading block-quantized weights never meet it.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import (attr_dtype, attr_int, format_sinfo, normalize_axis, prove_not_equal,
                          tensor_arg)
from .registry import register_op

# printed spelling of operators whose registry name differs from TVM's
SCRIPT_NAMES = {"relax.dequantize_affine": "dequantize"}


def quantize(data, scale, zero_point, axis: int = -1, out_dtype: str = "int8"):
    """R.quantize(data, scale, zero_point, axis=-1, out_dtype="int8")."""
    return make_call("relax.quantize", [as_tensor(data), as_tensor(scale), as_tensor(zero_point)],
                     {"axis": attr_int(axis, "quantize", "axis"),
                      "out_dtype": attr_dtype(out_dtype, "quantize", "out_dtype")})


def dequantize_affine(data, scale, zero_point, axis: int = -1, out_dtype: str = "float32"):
    """R.dequantize(data, scale, zero_point, axis=-1, out_dtype="float32") (TVM's form)."""
    return make_call("relax.dequantize_affine",
                     [as_tensor(data), as_tensor(scale), as_tensor(zero_point)],
                     {"axis": attr_int(axis, "dequantize", "axis"),
                      "out_dtype": attr_dtype(out_dtype, "dequantize", "out_dtype")})


def _infer_qdq(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    scale, zp = tensor_arg(call, 1, ctx, "scale"), tensor_arg(call, 2, ctx, "zero_point")
    name = "relax.quantize" if call.op.name == "relax.quantize" else "relax.dequantize"
    if scale.dtype is not None and not dt.is_float(scale.dtype):
        ctx.error(f"{name}: scale must be a float tensor, got {format_sinfo(scale)}")
    if zp.dtype is not None and not dt.is_int(zp.dtype):
        ctx.error(f"{name}: zero_point must be an integer tensor, got {format_sinfo(zp)}")
    want = dt.is_float if name == "relax.quantize" else dt.is_int
    if x.dtype is not None and not want(x.dtype):
        kind = "a float" if name == "relax.quantize" else "an integer"
        ctx.error(f"{name}: data must be {kind} tensor, got {format_sinfo(x)}")
    if x.ndim >= 0:
        axis = normalize_axis(ctx, call, call.attrs["axis"], max(x.ndim, 1), x) if x.ndim else 0
        for what, p in (("scale", scale), ("zero_point", zp)):
            if p.ndim > 1:
                ctx.error(f"{name}: {what} must be a scalar or 1-D, got {format_sinfo(p)}")
            if p.ndim == 1 and p.shape is not None and x.shape is not None and x.ndim and \
                    prove_not_equal(ctx, p.shape[0], x.shape[axis]) and \
                    prove_not_equal(ctx, p.shape[0], 1):
                ctx.error(f"{name}: {what} {format_sinfo(p)} does not match axis {axis} of "
                          f"{format_sinfo(x)}")
    return TensorStructInfo(x.shape, call.attrs["out_dtype"], x.ndim)


def along(values, ndim: int, axis: int):
    """A scalar or 1-D parameter laid out along ``axis`` for broadcasting."""
    values = np.asarray(values)
    if values.ndim == 0 or ndim == 0:
        return values.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = values.shape[0]
    return values.reshape(shape)


def clip_to(values, dtype: str):
    if dt.is_int(dtype):
        info = np.iinfo(dtype)
        return np.clip(values, info.min, info.max).astype(dtype)
    return values.astype(dtype)


def _quantize_reference(data, scale, zero_point, axis=-1, out_dtype="int8"):
    scaled = data.astype(np.float32) / along(scale, data.ndim, axis).astype(np.float32)
    if dt.is_int(out_dtype):
        scaled = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))
    return clip_to(scaled + along(zero_point, data.ndim, axis).astype(np.float32), out_dtype)


def _dequantize_reference(data, scale, zero_point, axis=-1, out_dtype="float32"):
    diff = data.astype(np.int32) - along(zero_point, data.ndim, axis).astype(np.int32)
    out = diff.astype(np.float32) * along(scale, data.ndim, axis).astype(np.float32)
    return clip_to(out, out_dtype)


register_op("relax.quantize", _infer_qdq, _quantize_reference, attr_names=("axis", "out_dtype"),
            constructor=quantize)
register_op("relax.dequantize_affine", _infer_qdq, _dequantize_reference,
            attr_names=("axis", "out_dtype"), constructor=dequantize_affine)

__all__ = ["quantize", "dequantize_affine", "SCRIPT_NAMES"]
