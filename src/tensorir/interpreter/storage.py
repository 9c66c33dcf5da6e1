"""Run-time storage of buffers: a flat NumPy array plus shape, strides and offset.

Every buffer the interpreter touches is a ``BufferView`` onto a 1-D array.
Views made from one parameter (``match_buffer`` regions, the flattened
buffers of lowered code) share that parameter's flat array object, which is
how the vectorised executor recognises that two buffers alias.
"""
from __future__ import annotations

import numpy as np

from .errors import OutOfBoundsError


def compact_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(int(extent), 1)
    return tuple(reversed(strides))


def _non_overlapping(shape, strides) -> bool:
    """Whether distinct in-shape index tuples always reach distinct elements."""
    reach = 0  # largest offset reachable through the dims seen so far
    for extent, stride in sorted(((n, abs(s)) for n, s in zip(shape, strides) if n > 1),
                                 key=lambda pair: pair[1]):
        if stride <= reach:
            return False
        reach += stride * (extent - 1)
    return True


class BufferView:
    """Element access for one buffer: ``data[offset + sum(index[d] * strides[d])]``.

    Indices may be ints or broadcastable integer arrays; ``mask`` (a boolean
    array, or None for "all active") marks the accesses that really happen:
    only those are bounds-checked, the others read a harmless element.
    """
    __slots__ = ("name", "data", "shape", "strides", "offset", "dtype", "_in_data", "non_overlapping")

    def __init__(self, name: str, data: np.ndarray, shape, strides=None, offset: int = 0):
        self.name = name
        self.data = data
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides) if strides else compact_strides(self.shape)
        self.offset = int(offset)
        self.dtype = data.dtype
        lo = self.offset + sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        hi = self.offset + sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        # When every in-shape index lands inside data, per-dimension checks suffice.
        self._in_data = any(n == 0 for n in self.shape) or (lo >= 0 and hi < data.size)
        self.non_overlapping = _non_overlapping(self.shape, self.strides)

    @staticmethod
    def allocate(name: str, shape, dtype) -> "BufferView":
        """Fresh zero-initialised storage (alloc_buffer / Allocate)."""
        size = 1
        for s in shape:
            size *= max(int(s), 0)
        return BufferView(name, np.zeros(size, dtype=dtype), shape)

    def flat_index(self, indices, mask=None):
        """Flat element numbers of an access, after checking it against the shape."""
        if len(indices) != len(self.shape):
            raise OutOfBoundsError(f"buffer {self.name!r} has {len(self.shape)} dimension(s) "
                                   f"but is accessed with {len(indices)} index(es)")
        flat = self.offset
        for dim, (index, extent, stride) in enumerate(zip(indices, self.shape, self.strides)):
            index = self._checked(index, extent, mask, f"dimension {dim}")
            flat = flat + index * stride
        if not self._in_data:
            flat = self._checked(flat, self.data.size, mask, "underlying storage (strides/elem_offset)")
        return flat

    def load(self, indices, mask=None):
        flat = self.flat_index(indices, mask)
        if self.data.size == 0:  # only reachable with every lane masked off
            return np.zeros(np.shape(flat), dtype=self.dtype)
        return self.data[flat]

    def store(self, indices, value) -> None:
        """Scalar store (the vectorised executor writes ``data`` directly)."""
        self.data[self.flat_index(indices)] = value

    def _checked(self, index, extent: int, mask, where: str):
        if isinstance(index, np.ndarray) and index.ndim:
            index = index.astype(np.int64, copy=False)
            bad = (index < 0) | (index >= extent)
            if bad.any():
                active = bad if mask is None else bad & mask
                if active.any():
                    first = tuple(np.argwhere(active)[0])
                    value = np.broadcast_to(index, active.shape)[first]
                    self._raise(int(value), extent, where)
                index = np.where(bad, 0, index)  # masked-off lanes read element 0
            return index
        value = int(index)
        if 0 <= value < extent:
            return value
        if mask is None or np.any(mask):
            self._raise(value, extent, where)
        return 0

    def _raise(self, value: int, extent: int, where: str):
        raise OutOfBoundsError(f"out-of-bounds access to buffer {self.name!r}: index {value} in "
                               f"{where} is outside [0, {extent}) (shape {list(self.shape)})")
