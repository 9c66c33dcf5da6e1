"""Reuse of large result arrays between calls.

A function's results (and intermediates the static plan does not cover) are fresh arrays on
every call. From 32 MiB glibc serves each one with a new ``mmap`` and unmaps it when NumPy
frees it, so the kernel that writes the next call's result first takes a page fault on every
page and the OS zeroes the memory: measured on a 32 MiB layer_norm -> softmax result, 6.7 ms a
call against 3.6 ms writing memory touched before (2 threads). ONNX Runtime and PyTorch keep
such blocks in their own arenas; this is the VM's.

``ResultPool.empty(shape, dtype)`` is ``np.empty`` below ``min_bytes``. From there it hands out
an array over an idle block of the same size class when one exists. The array's base is a
small ``_Lease`` object, and every view of the array keeps that lease alive (NumPy collapses
a view's base to the first non-array owner), so a block returns to the pool only when no
array, view or exported buffer reads it any more. Idle blocks are capped at ``max_idle_bytes``
in all (``RELAXSCRIPT_RESULT_POOL_MB``, default 512; 0 turns the reuse off); a block returned
beyond the cap is freed.
"""
from __future__ import annotations

import os
import threading
from math import prod

import numpy as np

from backends.aligned_memory import aligned_bytes, aligned_empty

SIZE_CLASS = 2 << 20        # blocks are whole 2 MiB units: the OS's large page
MIN_BYTES = 8 << 20         # below this glibc's heap reuses the memory itself (dynamic mmap threshold)
MAX_IDLE_BYTES = int(os.environ.get("RELAXSCRIPT_RESULT_POOL_MB", "512")) << 20


class _Lease:
    """Owner of a pooled block while arrays read it; gives it back when the last one is gone."""
    __slots__ = ("__array_interface__", "_block", "_pool")

    def __init__(self, pool: ResultPool, block: np.ndarray, shape: tuple, dtype: np.dtype):
        self._pool, self._block = pool, block
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (block.ctypes.data, False)}

    def __del__(self):
        pool = self._pool
        if pool is not None:        # interpreter shutdown may have cleared it
            pool.give_back(self._block)


class ResultPool:
    def __init__(self, min_bytes: int = MIN_BYTES, max_idle_bytes: int = MAX_IDLE_BYTES):
        self.min_bytes, self.max_idle_bytes = min_bytes, max_idle_bytes
        self._idle: dict[int, list[np.ndarray]] = {}
        self._idle_bytes = 0
        self._lock = threading.RLock()

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes

    def empty(self, shape, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize * prod(shape)
        # the common small result first; NumPy's own error for a negative dim
        if (nbytes < self.min_bytes or self.max_idle_bytes <= 0 or dtype.hasobject
                or any(d < 0 for d in shape)):
            return aligned_empty(shape, dtype)
        shape = tuple(int(d) for d in shape)
        size = -(-nbytes // SIZE_CLASS) * SIZE_CLASS
        with self._lock:
            blocks = self._idle.get(size)
            block = blocks.pop() if blocks else None
            if block is not None:
                self._idle_bytes -= size
        if block is None:
            block = aligned_bytes(size)    # MemoryError / ValueError as np.empty's
        return np.asarray(_Lease(self, block, shape, dtype))

    def give_back(self, block: np.ndarray) -> None:
        size = block.shape[0]
        # Nothing GC-tracked is created under the lock: a collection it set off could free another
        # lease, whose __del__ comes back here (the lock is reentrant for the same reason).
        fresh: list[np.ndarray] = []
        with self._lock:
            if self._idle_bytes + size <= self.max_idle_bytes:
                self._idle.setdefault(size, fresh).append(block)
                self._idle_bytes += size

    def clear(self) -> None:
        with self._lock:
            self._idle.clear()
            self._idle_bytes = 0


# one pool per process: results outlive the VM that made them
RESULTS = ResultPool()
