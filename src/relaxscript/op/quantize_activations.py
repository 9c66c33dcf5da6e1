"""``R.fake_quantize(x, format="q8_0")``: ``x`` rounded to 8-bit codes in blocks of 32 along
its last axis, as float32 (meaning: ``relaxscript.quantization.activations``).

Put in front of a matmul whose weight is an ``R.dequantize`` (``transform.QuantizeActivations``
does it for a whole module), it lets the generated quantized GEMV multiply integer codes by
integer codes, as llama.cpp does, while every other backend computes the same values in float.
"""
from __future__ import annotations

from tensorir import expr as E

from ..quantization.activations import activation_block
from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import format_sinfo, prove_not_equal, tensor_arg
from .registry import OpAttributeError, register_op


def fake_quantize(x, *, format: str = "q8_0"):  # noqa: A002 - the op's attribute name
    """R.fake_quantize(x, format="q8_0"): float32 x rounded to 8-bit codes per 32-value block."""
    try:
        activation_block(format)
    except ValueError as err:
        raise OpAttributeError(f"R.fake_quantize: {err}") from None
    return make_call("relax.fake_quantize", [as_tensor(x)], {"format": format})


def _infer_fake_quantize(call, ctx) -> TensorStructInfo:
    fmt = call.attrs["format"]
    try:
        block = activation_block(fmt)
    except ValueError as err:
        ctx.error(f"relax.fake_quantize: {err}")
    x = tensor_arg(call, 0, ctx)
    if x.dtype is not None and x.dtype != "float32":
        ctx.error(f"relax.fake_quantize ({fmt}): x must be float32, got {format_sinfo(x)}")
    if x.ndim == 0:
        ctx.error(f"relax.fake_quantize ({fmt}): x must have at least one axis, got {format_sinfo(x)}")
    if x.shape is not None and prove_not_equal(ctx, E.floormod(x.shape[-1], block), 0):
        ctx.error(f"relax.fake_quantize ({fmt}): the last axis of x must be whole blocks of {block} "
                  f"values, got {format_sinfo(x)}")
    if x.shape is None:
        return TensorStructInfo(None, "float32", x.ndim)
    return TensorStructInfo(x.shape, "float32")


def _reference(x, *, format):
    from ..quantization.activations import fake_quantize_numpy
    return fake_quantize_numpy(x, format)


register_op("relax.fake_quantize", _infer_fake_quantize, _reference, attr_names=("format",),
            constructor=fake_quantize)

__all__ = ["fake_quantize"]
