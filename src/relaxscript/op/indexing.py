"""Operators that select or join parts of tensors: concat, split, take,
strided_slice (part of the manipulation family; split out to keep files short).

Slices follow Python/NumPy semantics on symbolic bounds: negative indices
count from the end, and out-of-range bounds are clamped. Where the sign of a
symbolic bound or the need for clamping is provable, the deduced extent is
the plain expression; otherwise it carries ``Select``/``min``/``max`` terms,
which stay exact for every value of the variables.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..expr import Expr
from ..struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo
from ._convert import as_shape, as_tensor, as_tuple, make_call
from ._infer_util import (attr_axes, attr_int, const_value, format_sinfo, normalize_axes,
                          normalize_axis, product, prove_equal, prove_not_equal, same_dtype,
                          shape_arg, simplify, sinfo_of, tensor_arg)
from .registry import OpAttributeError, register_op


# ---------------------------------------------------------------- slice extents
def _prove(ctx, cond) -> bool:
    return ctx.analyzer.can_prove(cond)


def _clamp_index(ctx, index, dim, lo, hi):
    """Python slice-bound normalisation: wrap negatives once, then clamp to [lo, hi]."""
    index = E.convert(index)
    if _prove(ctx, E.GE(index, 0)):
        wrapped = index
    elif _prove(ctx, E.LT(index, 0)):
        wrapped = index + dim
    else:
        wrapped = E.Select(E.LT(index, 0), index + dim, index)
    if not _prove(ctx, E.GE(wrapped, lo)):
        wrapped = E.max_(wrapped, lo)
    if not _prove(ctx, E.LE(wrapped, hi)):
        wrapped = E.min_(wrapped, hi)
    return wrapped


def slice_extent(ctx, dim, begin, end, stride: int):
    """Number of elements of ``range(dim)[begin:end:stride]`` (``end`` None = to the end)."""
    if stride > 0:
        b = _clamp_index(ctx, begin, dim, 0, dim)
        e = dim if end is None else _clamp_index(ctx, end, dim, 0, dim)
        span, step = e - b, stride
    else:
        b = _clamp_index(ctx, begin, dim, -1, dim - 1)
        e = E.IntImm(-1) if end is None else _clamp_index(ctx, end, dim, -1, dim - 1)
        span, step = b - e, -stride
    count = E.ceildiv(span, step) if step != 1 else span
    if not _prove(ctx, E.GE(span, 0)):
        count = E.max_(count, 0)
    return simplify(ctx, count)


# ---------------------------------------------------------------- strided_slice
def strided_slice(x, axes, begin, end, strides=None, assume_inbound=False):
    """R.strided_slice(x, axes, begin, end, strides=None): ``x[begin:end:stride]`` on ``axes``.

    ``axes``, ``begin``, ``end`` and ``strides`` are stored as shape values
    (``R.shape([...])``); begin/end may be symbolic, strides must be non-zero ints.
    ``assume_inbound`` (TVM's) is accepted and not kept: bounds are always clamped as
    NumPy does, which is also right where TVM may assume they are in range.
    """
    if not isinstance(assume_inbound, bool):
        raise OpAttributeError(f"R.strided_slice: assume_inbound must be a bool, got {assume_inbound!r}")
    if not isinstance(axes, Expr):
        axes = attr_axes(axes, "strided_slice", "axes")
    as_list = [as_shape(v) for v in (axes, begin, end)]
    if strides is None:
        axes_info = sinfo_of(as_list[0])
        if axes_info.values is None:
            raise OpAttributeError("R.strided_slice: strides are required when axes are not literal")
        strides = [1] * len(axes_info.values)
    return make_call("relax.strided_slice", [as_tensor(x), *as_list, as_shape(strides)])


def _int_values(ctx, call, index: int, what: str):
    sinfo = shape_arg(call, index, ctx)
    if sinfo.values is None:
        return None
    values = [const_value(v) for v in sinfo.values]
    if any(v is None for v in values):
        ctx.error(f"relax.strided_slice: {what} must be integer constants, got {format_sinfo(sinfo)}")
    return values


def _infer_strided_slice(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    axes = _int_values(ctx, call, 1, "axes")
    begin, end = shape_arg(call, 2, ctx).values, shape_arg(call, 3, ctx).values
    strides = _int_values(ctx, call, 4, "strides")
    lengths = {len(v) for v in (axes, begin, end, strides) if v is not None}
    if len(lengths) > 1:
        ctx.error("relax.strided_slice: axes, begin, end and strides must have the same length")
    if strides is not None and 0 in strides:
        ctx.error("relax.strided_slice: strides must be non-zero")
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    if axes is not None:
        axes = normalize_axes(ctx, call, axes, x.ndim, x)
    if x.shape is None or None in (axes, begin, end, strides):
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    for axis, b, e, s in zip(axes, begin, end, strides):
        dims[axis] = slice_extent(ctx, dims[axis], b, e, s)
    return TensorStructInfo(dims, x.dtype)


def _strided_slice_reference(x, axes, begin, end, strides):
    index = [slice(None)] * x.ndim
    for axis, b, e, s in zip(axes, begin, end, strides):
        index[axis] = slice(int(b), int(e), int(s))
    return np.array(x[tuple(index)])


register_op("relax.strided_slice", _infer_strided_slice, _strided_slice_reference,
            constructor=strided_slice)


# ---------------------------------------------------------------- concat
def concat(tensors, axis: int | None = 0):
    """R.concat(tensors, axis=0): join tensors along an existing axis; ``axis=None``
    joins them flattened (TVM's and NumPy's meaning)."""
    return make_call("relax.concat", [as_tuple(tensors)],
                     {"axis": None if axis is None else attr_int(axis, "concat", "axis")})


def _infer_concat(call, ctx) -> TensorStructInfo:
    fields = sinfo_of(call.args[0])
    if not isinstance(fields, TupleStructInfo):
        ctx.error(f"relax.concat expects a tuple of tensors, got {format_sinfo(fields)}")
    tensors = list(fields.fields)
    if not tensors or not all(isinstance(t, TensorStructInfo) for t in tensors):
        ctx.error(f"relax.concat expects a non-empty tuple of tensors, got {format_sinfo(fields)}")
    dtype = same_dtype(ctx, call, tensors)
    if call.attrs["axis"] is None:   # flattened: one dim, the total size
        if any(t.shape is None for t in tensors):
            return TensorStructInfo(None, dtype, 1)
        return TensorStructInfo([simplify(ctx, sum((product(t.shape) for t in tensors[1:]),
                                                   product(tensors[0].shape)))], dtype)
    ranks = {t.ndim for t in tensors if t.ndim >= 0}
    if len(ranks) > 1:
        ctx.error(f"relax.concat: tensors have different ranks: {format_sinfo(fields)}")
    if not ranks:
        return TensorStructInfo(None, dtype)
    ndim = ranks.pop()
    axis = normalize_axis(ctx, call, call.attrs["axis"], ndim, tensors[0])
    if any(t.shape is None for t in tensors):
        return TensorStructInfo(None, dtype, ndim)
    dims = list(tensors[0].shape)
    decided = True
    for t in tensors[1:]:
        for i in range(ndim):
            if i == axis:
                dims[i] = dims[i] + t.shape[i]
            elif prove_not_equal(ctx, dims[i], t.shape[i]):
                ctx.error(f"relax.concat: dimension {i} differs between "
                          f"{format_sinfo(tensors[0])} and {format_sinfo(t)}")
            elif not prove_equal(ctx, dims[i], t.shape[i]):
                decided = False
    if not decided:
        return TensorStructInfo(None, dtype, ndim)
    dims[axis] = simplify(ctx, dims[axis])
    return TensorStructInfo(dims, dtype)


register_op("relax.concat", _infer_concat,
            lambda tensors, axis=0: np.concatenate(list(tensors), axis=axis),  # None: flattened
            attr_names=("axis",), constructor=concat)


# ---------------------------------------------------------------- split
MAX_SPLIT_SECTIONS = 2 ** 16

def split(x, indices_or_sections, axis: int = 0):
    """R.split(x, indices_or_sections, axis=0): a tuple of parts (NumPy ``np.split``).

    An int ``k`` splits into k equal parts (the dim must be divisible by k);
    a tuple of ints gives the split points. As in TVM (and unlike NumPy), a
    negative split point is 0, not counted from the end.
    """
    if isinstance(indices_or_sections, (int, np.integer)):
        value = attr_int(indices_or_sections, "split", "indices_or_sections")
        if value <= 0:
            raise OpAttributeError(f"R.split: number of sections must be positive, got {value}")
        if value > MAX_SPLIT_SECTIONS:  # one tuple field per section is built while deducing
            raise OpAttributeError(f"R.split: at most {MAX_SPLIT_SECTIONS} sections, got {value}")
    else:
        value = attr_axes(indices_or_sections, "split", "indices_or_sections")
    return make_call("relax.split", [as_tensor(x)],
                     {"indices_or_sections": value, "axis": attr_int(axis, "split", "axis")})


def _infer_split(call, ctx) -> TupleStructInfo:
    x = tensor_arg(call, 0, ctx)
    spec = call.attrs["indices_or_sections"]
    count = spec if isinstance(spec, int) else len(spec) + 1
    if x.ndim < 0:
        return TupleStructInfo([TensorStructInfo(None, x.dtype)] * count)
    axis = normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    if x.shape is None:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, x.ndim)] * count)
    dim = x.shape[axis]
    if isinstance(spec, int):
        if prove_not_equal(ctx, dim % spec, 0):
            ctx.error(f"relax.split: dimension {axis} of {format_sinfo(x)} is not divisible "
                      f"into {spec} sections")
        sizes = [simplify(ctx, dim // spec)] * spec
    else:
        points = split_points(spec)
        sizes = [slice_extent(ctx, dim, b, e, 1) for b, e in zip([0, *points], [*points, None])]
    parts = []
    for size in sizes:
        dims = list(x.shape)
        dims[axis] = size
        parts.append(TensorStructInfo(dims, x.dtype))
    return TupleStructInfo(parts)


def split_points(spec) -> list[int]:
    """Split points as TVM reads them: a negative one is 0 (NumPy would count from the end)."""
    return [max(int(b), 0) for b in spec]


def _split_reference(x, indices_or_sections, axis=0):
    if not isinstance(indices_or_sections, int):
        indices_or_sections = split_points(indices_or_sections)
    return tuple(np.split(x, indices_or_sections, axis))


register_op("relax.split", _infer_split, _split_reference,
            attr_names=("indices_or_sections", "axis"), constructor=split)


# ---------------------------------------------------------------- take
TAKE_MODES = ("fast", "clip", "wrap")


def take(x, indices, axis=None, mode="fast"):
    """R.take(x, indices, axis=None, mode="fast"): gather along ``axis`` (x flattened when
    None). ``indices`` may be an ``R.Prim`` integer (TVM's scalar index): the axis is dropped.
    ``mode``: ``"fast"`` (TVM leaves an index out of range undefined; here it has NumPy's
    meaning, negatives from the end, and any other value is an error), ``"clip"`` (clamped
    into ``[0, n - 1]``) or ``"wrap"`` (modulo ``n``), as NumPy's ``take`` modes."""
    if axis is not None:
        axis = attr_int(axis, "take", "axis")
    if mode not in TAKE_MODES:
        raise OpAttributeError(f"R.take: mode must be one of {', '.join(TAKE_MODES)}, got {mode!r}")
    return make_call("relax.take", [as_tensor(x), as_tensor(indices, "int64")],
                     {"axis": axis, "mode": mode})


def _infer_take(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    if isinstance(sinfo_of(call.args[1]), PrimStructInfo):
        # TVM's scalar index (R.Prim / R.prim_value): the axis is dropped, as NumPy's take
        index = sinfo_of(call.args[1])
        if index.dtype is not None and not dt.is_int(index.dtype):
            ctx.error(f"relax.take: a scalar index must be an integer, got {format_sinfo(index)}")
        indices = TensorStructInfo([], index.dtype)
    else:
        indices = tensor_arg(call, 1, ctx)
    if indices.dtype is not None and not dt.is_int(indices.dtype):
        ctx.error(f"relax.take: indices must be an integer tensor, got {format_sinfo(indices)}")
    axis = call.attrs.get("axis")
    if axis is None:
        return TensorStructInfo(indices.shape, x.dtype, indices.ndim)
    if x.ndim < 0 or indices.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    axis = normalize_axis(ctx, call, axis, x.ndim, x)
    ndim = x.ndim - 1 + indices.ndim
    if x.shape is None or indices.shape is None:
        return TensorStructInfo(None, x.dtype, ndim)
    return TensorStructInfo([*x.shape[:axis], *indices.shape, *x.shape[axis + 1:]], x.dtype)


def _take_reference(x, indices, axis=None, mode="fast"):
    if not isinstance(indices, np.ndarray):   # an R.Prim index: a Python int at run time
        indices = np.int64(indices)
    return np.asarray(np.take(x, indices, axis, mode="raise" if mode == "fast" else mode))


register_op("relax.take", _infer_take, _take_reference,
            attr_names=("axis", "mode"), constructor=take)

__all__ = ["strided_slice", "concat", "split", "take"]
