"""Buffers: named multi-dimensional storage with symbolic shapes."""
from __future__ import annotations

from typing import Sequence

from . import dtype as dt
from .expr import PrimExpr, Var, convert
from .node import Node


class Buffer(Node):
    """A tensor the loop program reads or writes.

    ``strides`` is empty for a dense row-major buffer; ``elem_offset`` is the
    element offset into the underlying data (non-zero only for views made by
    ``T.match_buffer`` or by flattening). ``scope`` is the storage scope:
    "global", "local", "shared", ...
    """
    __slots__ = ("name", "shape", "dtype", "strides", "elem_offset", "scope")
    _binder = True
    _fields = ("shape", "strides", "elem_offset")
    _attrs = ("dtype", "scope")  # name excluded: buffers compare up to renaming

    def __init__(self, name: str, shape: Sequence, dtype: str = "float32", *,
                 strides: Sequence = (), elem_offset=0, scope: str = "global"):
        self.name = name
        self.shape = tuple(convert(s) for s in shape)
        self.dtype = dt.normalize(dtype)
        self.strides = tuple(convert(s) for s in strides)
        self.elem_offset = convert(elem_offset)
        self.scope = scope

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> PrimExpr:
        from .expr import BufferLoad
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, indices)

    def load(self, *indices) -> PrimExpr:
        from .expr import BufferLoad
        return BufferLoad(self, indices)


def decl_buffer(name: str, shape: Sequence, dtype: str = "float32", scope: str = "global") -> Buffer:
    return Buffer(name, shape, dtype, scope=scope)


__all__ = ["Buffer", "decl_buffer", "Var"]
