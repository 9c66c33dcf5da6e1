"""Annotations (struct info) of graph-level values.

A value is an Object, a Prim scalar, a Shape, a Tensor, a Tuple or a
Callable. Shapes and tensor shapes are tuples of ``tensorir`` PrimExprs, so
symbolic dimensions (``n``, ``n * 4``) are first-class. Unknown parts are
``None`` (shape values, dtype) or ``-1`` (ndim).
"""
from __future__ import annotations

from typing import Sequence

from tensorir import dtype as dt
from tensorir.expr import PrimExpr, convert
from tensorir.node import Node


class StructInfo(Node):
    __slots__ = ()


class ObjectStructInfo(StructInfo):
    """Any value (``R.Object``)."""
    __slots__ = ()


class PrimStructInfo(StructInfo):
    """A scalar (``R.Prim("int64")``), optionally with a known symbolic value."""
    __slots__ = ("dtype", "value")
    _fields = ("value",)
    _attrs = ("dtype",)

    def __init__(self, dtype: str = "int64", value: PrimExpr | int | None = None):
        self.dtype = dt.normalize(dtype)
        self.value = None if value is None else convert(value)


class ShapeStructInfo(StructInfo):
    """A shape value (``R.Shape([n, 4])`` or ``R.Shape(ndim=2)``)."""
    __slots__ = ("values", "ndim")
    _fields = ("values",)
    _attrs = ("ndim",)

    def __init__(self, values: Sequence | None = None, ndim: int = -1):
        if values is not None:
            values = tuple(convert(v) for v in values)
            if ndim not in (-1, len(values)):
                raise ValueError(f"ShapeStructInfo: ndim={ndim} but {len(values)} values")
            ndim = len(values)
        self.values = values
        self.ndim = ndim


class TensorStructInfo(StructInfo):
    """A tensor: symbolic shape (or only ndim, or nothing) and dtype (or None)."""
    __slots__ = ("shape", "dtype", "ndim")
    _fields = ("shape",)
    _attrs = ("dtype", "ndim")

    def __init__(self, shape: Sequence | None = None, dtype: str | None = None, ndim: int = -1):
        if shape is not None:
            shape = tuple(convert(v) for v in shape)
            if ndim not in (-1, len(shape)):
                raise ValueError(f"TensorStructInfo: ndim={ndim} but shape has {len(shape)} dims")
            ndim = len(shape)
        self.shape = shape
        self.dtype = None if dtype is None else dt.normalize(dtype)
        self.ndim = ndim


class TupleStructInfo(StructInfo):
    __slots__ = ("fields",)
    _fields = ("fields",)

    def __init__(self, fields: Sequence[StructInfo]):
        self.fields = tuple(fields)


class FuncStructInfo(StructInfo):
    """A callable: parameter annotations (None when opaque) and the return annotation."""
    __slots__ = ("params", "ret", "purity")
    _fields = ("params", "ret")
    _attrs = ("purity",)

    def __init__(self, params: Sequence[StructInfo] | None, ret: StructInfo, purity: bool = True):
        self.params = None if params is None else tuple(params)
        self.ret = ret
        self.purity = purity
