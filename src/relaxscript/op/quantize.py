"""``R.dequantize(data, scale, [min], format=...)``: the float32 matrix a block-quantized
tensor stands for (formats and layouts: ``relaxscript.quantization.formats``).

A model uses it where it would use a float weight: ``R.matmul(x, R.dequantize(...))``
for a linear layer (the matrix is ``(in_features, out_features)``), and
``R.permute_dims(R.take(R.dequantize(...), ids, axis=1))`` for an embedding
table stored as ``(hidden, vocab)`` (a tied LM head is then ``R.matmul(h, table)``).
The pipeline keeps the op away from the BLAS library and fuses it into its
consumer's kernel, which then reads the blocks.
"""
from __future__ import annotations

from tensorir import expr as E

from ..quantization.formats import SCALE_DTYPES, dequantize_numpy, get_format
from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import format_sinfo, prove_not_equal, simplify, tensor_arg
from .registry import OpAttributeError, register_op


def dequantize(data, scale, min=None, *, format: str | None = None,  # noqa: A002 - op's names
               axis: int = -1, out_dtype: str = "float32"):
    """R.dequantize(data, scale, [min], format="q4_0"|"q4_1"|"q8_0"): float32 (rows, cols), blocks of
    32 rows per column (layout: ``relaxscript.quantization.formats``).

    Without ``format`` it is TVM's ``R.dequantize(data, scale, zero_point, axis=-1,
    out_dtype="float32")`` (``op/qdq.py``; the third argument is the zero point)."""
    if format is None:
        if min is None:
            raise OpAttributeError("R.dequantize: give format= (a block-quantized weight) or a "
                                   "zero_point (TVM's affine dequantize)")
        from .qdq import dequantize_affine
        return dequantize_affine(data, scale, min, axis, out_dtype)
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
        ctx.error(f"{name}: data must be 2-D (packed rows, cols), got {format_sinfo(data)}")
    others = [tensor_arg(call, i, ctx) for i in range(1, len(call.args))]
    for what, sinfo in zip(("scale", "min"), others):
        if sinfo.dtype is not None and sinfo.dtype not in SCALE_DTYPES:
            ctx.error(f"{name}: {what} must be float16 or float32, got {format_sinfo(sinfo)}")
        if sinfo.ndim not in (-1, 2):
            ctx.error(f"{name}: {what} must be 2-D (blocks, cols), got {format_sinfo(sinfo)}")
    if len(others) == 2 and None not in (others[0].dtype, others[1].dtype) and others[0].dtype != others[1].dtype:
        ctx.error(f"{name}: scale and min must have one dtype, got {format_sinfo(others[0])} and "
                  f"{format_sinfo(others[1])}")
    if data.shape is None:
        return TensorStructInfo(None, "float32", 2)
    packed_rows, cols = data.shape
    packed_block = fmt.block // fmt.codes_per_byte
    if prove_not_equal(ctx, E.floormod(packed_rows, packed_block), 0):
        ctx.error(f"{name}: data has {packed_rows} rows, not whole blocks of {packed_block} "
                  f"({fmt.block} values), got {format_sinfo(data)}")
    rows = simplify(ctx, packed_rows * fmt.codes_per_byte)
    nblocks = simplify(ctx, E.floordiv(packed_rows, packed_block))
    for what, sinfo in zip(("scale", "min"), others):
        if sinfo.shape is None:
            continue
        for dim, want, label in zip(sinfo.shape, (nblocks, cols), ("blocks", "columns")):
            if prove_not_equal(ctx, dim, want):
                ctx.error(f"{name}: {what} must have shape (blocks, cols) = ({nblocks}, {cols}) "
                          f"for data {format_sinfo(data)}, got {format_sinfo(sinfo)} ({label} differ)")
    return TensorStructInfo([rows, cols], "float32")


def _reference(data, scale, minimum=None, *, format):
    return dequantize_numpy(data, scale, minimum, format=format)


register_op("relax.dequantize", _infer_dequantize, _reference, attr_names=("format",),
            constructor=dequantize)

__all__ = ["dequantize"]
