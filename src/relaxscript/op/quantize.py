"""``R.dequantize(data, scale, [min], format=...)``: the float32 matrix a block-quantized
tensor stands for (formats and layouts: ``relaxscript.quantization.formats``).

A model uses it where it would use a float weight: ``R.matmul(x,
R.permute_dims(R.dequantize(...)))`` for a linear layer, ``R.take(R.dequantize(...),
ids, axis=0)`` for an embedding. The pipeline keeps the op away from the BLAS
library and fuses it into its consumer's kernel, which then reads the blocks.
"""
from __future__ import annotations

from tensorir import expr as E

from ..quantization.formats import dequantize_numpy, get_format
from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import format_sinfo, prove_equal, prove_not_equal, simplify, tensor_arg
from .registry import OpAttributeError, register_op


def dequantize(data, scale, min=None, *, format: str):  # noqa: A002 - the op's argument name
    """R.dequantize(data, scale, [min], format="q4_1"|"q8_0"): float32 (rows, cols)."""
    try:
        fmt = get_format(format)
    except ValueError as err:
        raise OpAttributeError(f"R.dequantize: {err}") from None
    if fmt.has_min != (min is not None):
        raise OpAttributeError(f"R.dequantize: format {fmt.name!r} "
                               f"{'takes a min tensor after scale' if fmt.has_min else 'takes no min tensor'}")
    args = [as_tensor(data), as_tensor(scale)] + ([as_tensor(min)] if min is not None else [])
    return make_call("relax.dequantize", args, {"format": fmt.name})


def _infer_dequantize(call, ctx) -> TensorStructInfo:
    fmt = get_format(call.attrs["format"])
    name = f"relax.dequantize ({fmt.name})"
    if len(call.args) != fmt.num_tensors:
        ctx.error(f"{name}: takes {fmt.num_tensors} tensors (data, scale{', min' if fmt.has_min else ''}), "
                  f"got {len(call.args)}")
    data = tensor_arg(call, 0, ctx)
    if data.dtype is not None and data.dtype != fmt.data_dtype:
        ctx.error(f"{name}: data must be {fmt.data_dtype}, got {format_sinfo(data)}")
    if data.ndim not in (-1, 2):
        ctx.error(f"{name}: data must be 2-D (rows, packed columns), got {format_sinfo(data)}")
    others = [tensor_arg(call, i, ctx) for i in range(1, len(call.args))]
    for what, sinfo in zip(("scale", "min"), others):
        if sinfo.dtype is not None and sinfo.dtype != "float32":
            ctx.error(f"{name}: {what} must be float32, got {format_sinfo(sinfo)}")
        if sinfo.ndim not in (-1, 2):
            ctx.error(f"{name}: {what} must be 2-D (rows, blocks), got {format_sinfo(sinfo)}")
    if data.shape is None:
        return TensorStructInfo(None, "float32", 2)
    rows, packed = data.shape
    cols = simplify(ctx, packed * fmt.codes_per_byte)
    blocks_per_packed = fmt.block // fmt.codes_per_byte
    if prove_not_equal(ctx, E.floormod(packed, blocks_per_packed), 0):
        ctx.error(f"{name}: data has {packed} columns, not whole blocks of {blocks_per_packed} bytes "
                  f"({fmt.block} values), got {format_sinfo(data)}")
    nblocks = simplify(ctx, E.floordiv(packed, blocks_per_packed))
    for what, sinfo in zip(("scale", "min"), others):
        if sinfo.shape is None:
            continue
        for dim, want, label in zip(sinfo.shape, (rows, nblocks), ("rows", "blocks")):
            if prove_not_equal(ctx, dim, want):
                ctx.error(f"{name}: {what} must have shape (rows, blocks) = ({rows}, {nblocks}) "
                          f"for data {format_sinfo(data)}, got {format_sinfo(sinfo)} ({label} differ)")
    return TensorStructInfo([rows, cols], "float32")


def _reference(data, scale, minimum=None, *, format):
    return dequantize_numpy(data, scale, minimum, format=format)


register_op("relax.dequantize", _infer_dequantize, _reference, attr_names=("format",),
            constructor=dequantize)

__all__ = ["dequantize"]
