"""Shared helpers of the deduction rules: argument annotations, symbolic
shape arithmetic, broadcasting and axis normalisation.

Broadcasting (NumPy rules, right-aligned): two dims are compatible when one
is 1 or both are equal. A pair that is provably incompatible (both provably
different and neither can be 1, e.g. ``4`` vs ``5``) is an error naming both
annotations. A pair that cannot be decided (``n`` vs ``m``) makes the result
coarse: the output keeps its ndim and dtype but loses its shape, because
picking either side could be wrong at run time; ``match_cast`` can restore it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.script.expr_printer import format_expr

from ..expr import Constant, PrimValue, ShapeExpr, Tuple
from ..struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
                           TensorStructInfo, TupleStructInfo)
from ..struct_info_util import format_sinfo
from .registry import OpAttributeError


def make_analyzer():
    from tensorir.arith import Analyzer
    return Analyzer()


# ---------------------------------------------------------------- annotations of arguments
def sinfo_of(expr) -> StructInfo:
    """The annotation of an argument; leaves built by constructors are annotated directly."""
    if expr.struct_info is not None:
        return expr.struct_info
    if isinstance(expr, ShapeExpr):
        return ShapeStructInfo(expr.values)
    if isinstance(expr, PrimValue):
        return PrimStructInfo(expr.value.dtype, expr.value)
    if isinstance(expr, Constant):
        return TensorStructInfo(expr.data.shape, expr.data.dtype.name)
    if isinstance(expr, Tuple):
        return TupleStructInfo([sinfo_of(f) for f in expr.fields])
    return ObjectStructInfo()


def format_dim(d) -> str:
    return format_expr(d)


def tensor_arg(call, index: int, ctx, what: str = "argument") -> TensorStructInfo:
    sinfo = sinfo_of(call.args[index])
    if not isinstance(sinfo, TensorStructInfo):
        ctx.error(f"{call.op.name}: {what} {index} must be a tensor, got {format_sinfo(sinfo)}")
    return sinfo


def shape_arg(call, index: int, ctx) -> ShapeStructInfo:
    sinfo = sinfo_of(call.args[index])
    if not isinstance(sinfo, ShapeStructInfo):
        ctx.error(f"{call.op.name}: argument {index} must be a shape, got {format_sinfo(sinfo)}")
    return sinfo


# ---------------------------------------------------------------- symbolic arithmetic
def simplify(ctx, e) -> E.PrimExpr:
    return ctx.analyzer.simplify(E.convert(e))


def simplify_shape(ctx, dims: Sequence) -> tuple[E.PrimExpr, ...]:
    return tuple(simplify(ctx, d) for d in dims)


def prove_equal(ctx, a, b) -> bool:
    return ctx.analyzer.can_prove_equal(E.convert(a), E.convert(b))


def prove_not_equal(ctx, a, b) -> bool:
    return ctx.analyzer.can_prove(E.NE(E.convert(a), E.convert(b)))


def product(dims: Sequence) -> E.PrimExpr:
    total = E.IntImm(1)
    for d in dims:
        total = total * d
    return total


def const_value(e) -> int | None:
    return e.value if E.is_const_int(e) else None


# ---------------------------------------------------------------- axes
def normalize_axis(ctx, call, axis: int, ndim: int, sinfo: StructInfo) -> int:
    if not -ndim <= axis < ndim:
        ctx.error(f"{call.op.name}: axis {axis} is out of range for {format_sinfo(sinfo)} "
                  f"(ndim {ndim})")
    return axis + ndim if axis < 0 else axis


def normalize_axes(ctx, call, axes: Sequence[int], ndim: int, sinfo: StructInfo) -> list[int]:
    out = [normalize_axis(ctx, call, a, ndim, sinfo) for a in axes]
    if len(set(out)) != len(out):
        ctx.error(f"{call.op.name}: repeated axis in {tuple(axes)} for {format_sinfo(sinfo)}")
    return out


def attr_axes(value, op: str, name: str = "axis") -> tuple[int, ...] | None:
    """Normalise an axis attribute to a tuple of ints (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (attr_int(value, op, name),)
    try:
        items = tuple(value)
    except TypeError:
        items = None
    if items is None or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                for a in items):
        raise OpAttributeError(f"R.{op}: {name} must be an int or a tuple of ints, got {value!r}")
    for a in items:
        attr_int(a, op, name)  # range check
    return tuple(int(a) for a in items)


def attr_int(value, op: str, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise OpAttributeError(f"R.{op}: {name} must be an int, got {value!r}")
    if not -2 ** 63 <= value < 2 ** 63:
        raise OpAttributeError(f"R.{op}: {name} {value} does not fit in int64")
    return int(value)


def attr_dtype(value, op: str, name: str = "dtype") -> str:
    try:
        dtype = dt.normalize(value)
    except (ValueError, TypeError):
        raise OpAttributeError(f"R.{op}: {name} {value!r} is not a known dtype") from None
    if dtype in ("void", "handle"):
        raise OpAttributeError(f"R.{op}: {name} {value!r} is not a tensor element dtype")
    return dtype


def optional_attr_dtype(value, op: str, name: str = "out_dtype") -> str | None:
    """An optional dtype attribute: None, or TVM's printed ``"void"`` / ``""`` for "not given"."""
    return None if value in (None, "void", "") else attr_dtype(value, op, name)


# ---------------------------------------------------------------- broadcasting
def broadcast_dim(ctx, a, b):
    """Broadcast two dims: the result dim, None if undecidable, or raise on conflict."""
    one = E.IntImm(1)
    if prove_equal(ctx, a, one):
        return b
    if prove_equal(ctx, b, one) or prove_equal(ctx, a, b):
        return a
    if prove_not_equal(ctx, a, b) and prove_not_equal(ctx, a, one) and prove_not_equal(ctx, b, one):
        raise _Conflict(a, b)
    return None


class _Conflict(Exception):
    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a, b


def broadcast_shapes(ctx, call, sinfos: Sequence[TensorStructInfo]):
    """Broadcast the shapes of tensor annotations.

    Returns the output shape, or an int ndim when only the rank is known
    (coarse inputs or undecidable dims), or -1 when not even that is known.
    """
    if any(s.ndim < 0 for s in sinfos):
        return -1
    ndim = max((s.ndim for s in sinfos), default=0)
    if any(s.shape is None for s in sinfos):
        return ndim
    out = [E.IntImm(1)] * ndim
    decided = True
    for s in sinfos:
        padded = [E.IntImm(1)] * (ndim - s.ndim) + list(s.shape)
        for i, d in enumerate(padded):
            if out[i] is None:
                continue
            try:
                out[i] = broadcast_dim(ctx, out[i], d)
            except _Conflict as c:
                names = " and ".join(format_sinfo(x) for x in sinfos)
                ctx.error(f"{call.op.name}: cannot broadcast {names}: dimension {i - ndim} "
                          f"is {format_dim(c.a)} vs {format_dim(c.b)}")
            decided = decided and out[i] is not None
    return simplify_shape(ctx, out) if decided else ndim


def tensor_from(shape_or_ndim, dtype: str | None) -> TensorStructInfo:
    """Build a tensor annotation from ``broadcast_shapes``-style results."""
    if isinstance(shape_or_ndim, int):
        return TensorStructInfo(None, dtype, shape_or_ndim)
    return TensorStructInfo(shape_or_ndim, dtype)


def same_dtype(ctx, call, sinfos: Sequence[TensorStructInfo]) -> str | None:
    """The common dtype of tensors; unknown if any is unknown; an error if two differ."""
    known = {s.dtype for s in sinfos if s.dtype is not None}
    if len(known) > 1:
        names = " and ".join(format_sinfo(s) for s in sinfos)
        ctx.error(f"{call.op.name}: operands have different dtypes: {names} (use R.astype)")
    if any(s.dtype is None for s in sinfos):
        return None
    return known.pop() if known else None
