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

    ``data`` is set on a *view*: a buffer with its own shape, strides and
    elem_offset over the storage of another buffer (a parameter, an
    ``Allocate`` or an ``alloc_buffer``), as made by ``flatten_buffers`` or
    declared in script as ``T.Buffer(shape, dtype, data=x.data)``. Element
    ``idx`` of the view is element ``elem_offset + sum(idx[d] * strides[d])``
    of that storage. A view of a view records the root storage buffer, so
    ``data`` is never itself a view. ``storage`` gives the buffer owning the
    memory either way.
    """
    __slots__ = ("name", "shape", "dtype", "strides", "elem_offset", "scope", "data")
    _binder = True
    _fields = ("shape", "strides", "elem_offset", "data")
    _attrs = ("dtype", "scope")  # name excluded: buffers compare up to renaming

    def __init__(self, name: str, shape: Sequence, dtype: str = "float32", *,
                 strides: Sequence = (), elem_offset=0, scope: str = "global",
                 data: "Buffer | None" = None):
        self.name = name
        self.shape = tuple(convert(s) for s in shape)
        self.dtype = dt.normalize(dtype)
        self.strides = tuple(convert(s) for s in strides)
        if self.strides and len(self.strides) != len(self.shape):
            # (one stride per dimension, or none for row-major: another count has no meaning)
            raise ValueError(f"buffer {name!r} has {len(self.shape)} dimension(s) but {len(self.strides)} "
                             f"stride(s)")
        self.elem_offset = convert(elem_offset)
        self.scope = scope
        if data is not None and not isinstance(data, Buffer):
            raise TypeError(f"Buffer data must be a Buffer (the storage owner), got {type(data).__name__}")
        self.data = data.storage if data is not None else None

    @property
    def storage(self) -> "Buffer":
        """The buffer that owns this buffer's memory: ``data`` for a view, else itself."""
        return self.data if self.data is not None else self

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


class Pointer(Buffer):
    """A typed pointer parameter, ``p: T.handle("float32")`` (TVM's form of a subroutine's
    array argument): storage of an unknown extent, read and written only through the views
    declared over it (``A = T.decl_buffer(shape, dtype, data=p)``). A function taking one is a
    subroutine: another prim_func calls it with ``T.address_of(B[i, 0])`` or ``B.data``, and the
    build inlines it there (``tensorir.transform.inline_subroutines``); it is never a kernel."""
    __slots__ = ()

    def __init__(self, name: str, dtype: str = "float32"):
        super().__init__(name, (), dtype)


def decl_buffer(name: str, shape: Sequence, dtype: str = "float32", scope: str = "global") -> Buffer:
    return Buffer(name, shape, dtype, scope=scope)


__all__ = ["Buffer", "Pointer", "decl_buffer", "Var"]
