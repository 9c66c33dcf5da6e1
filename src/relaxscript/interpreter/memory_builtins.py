"""The interpreter's lowered memory operators, with real aliasing.

A storage is a NumPy ``uint8`` array; ``R.memory.alloc_tensor`` returns a view
of it at a byte offset, so two tensors planned into overlapping bytes really
overwrite each other and a planning bug shows up as a wrong result. Every
fresh tensor view of a float dtype is filled with NaN, so a tensor that is
still live when its bytes are handed out again is visibly clobbered.

Bytes come from an allocator: by default every allocation is fresh; a
``PooledAllocator`` (installed with ``use_allocator``) models a runtime
memory pool that recycles killed blocks of exactly the same size, and can
be shared by successive runs. ``last_run_stats()`` reports the bytes the
most recent ``rx.interpret`` call allocated.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

import numpy as np

from tensorir import dtype as dt
from tensorir.errors import ShapeMismatchError
from tensorir.function import PrimFunc

from ..expr import Call, GlobalVar
from .allocation import allocation_error, impossible_shape
from .builtins import as_value_list, register_builtin, run_prim_func
from .values import ShapeTuple

if TYPE_CHECKING:
    from .evaluator import Frame


@dataclass
class MemoryStats:
    """What one run allocated. ``allocated_bytes`` counts bytes newly obtained from
    the allocator's system (a pool hit costs nothing); ``requested_bytes`` counts
    every request; ``peak_live_bytes`` is the largest total of requested bytes not
    yet killed."""
    allocated_bytes: int = 0
    requested_bytes: int = 0
    storage_allocations: int = 0
    tensor_allocations: int = 0
    live_bytes: int = 0
    peak_live_bytes: int = 0


class Storage:
    """A byte buffer made by ``R.memory.alloc_storage`` (or behind a builtin tensor)."""
    __slots__ = ("data", "killed")

    def __init__(self, data: np.ndarray):
        self.data = data
        self.killed = False

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    def __repr__(self) -> str:
        return f"<storage of {self.nbytes} bytes>"


class FreshAllocator:
    """Every request gets new bytes; freeing only drops them."""

    def __init__(self):
        self.total_allocated_bytes = 0

    def alloc(self, nbytes: int) -> tuple[np.ndarray, bool]:
        """The block and whether it is newly allocated."""
        self.total_allocated_bytes += nbytes
        return np.empty(nbytes, dtype=np.uint8), True

    def free(self, block: np.ndarray) -> None:
        pass


class PooledAllocator(FreshAllocator):
    """A runtime pool: a freed block is reused by a later request of exactly its size."""

    def __init__(self):
        super().__init__()
        self.free_blocks: dict[int, list[np.ndarray]] = {}

    def alloc(self, nbytes: int) -> tuple[np.ndarray, bool]:
        blocks = self.free_blocks.get(nbytes)
        if blocks:
            return blocks.pop(), False
        return super().alloc(nbytes)

    def free(self, block: np.ndarray) -> None:
        self.free_blocks.setdefault(int(block.size), []).append(block)


class _RunState:
    def __init__(self):
        self.allocator: FreshAllocator = FreshAllocator()
        self.user_allocator: FreshAllocator | None = None
        self.stats = MemoryStats()
        self.tensor_owner: dict[int, tuple[np.ndarray, Storage]] = {}


_STATE = _RunState()


def begin_run() -> MemoryStats:
    """Reset the per-run statistics (``rx.interpret`` calls this on entry)."""
    _STATE.stats = MemoryStats()
    _STATE.tensor_owner = {}
    _STATE.allocator = _STATE.user_allocator or FreshAllocator()
    return _STATE.stats


def last_run_stats() -> MemoryStats:
    """Memory statistics of the most recent ``rx.interpret`` call."""
    return _STATE.stats


@contextlib.contextmanager
def use_allocator(allocator: FreshAllocator):
    """Runs inside the ``with`` block take bytes from ``allocator`` (e.g. a shared
    ``PooledAllocator`` across successive runs)."""
    saved = _STATE.user_allocator
    _STATE.user_allocator = allocator
    try:
        yield allocator
    finally:
        _STATE.user_allocator = saved


def _new_storage(nbytes: int, frame: "Frame", what: str) -> Storage:
    reason = impossible_shape((nbytes,), 1)
    try:
        if reason is not None:
            raise MemoryError(reason)
        block, fresh = _STATE.allocator.alloc(nbytes)
    except (ValueError, MemoryError):
        raise allocation_error(frame.func_name, what, "", (nbytes,), np.uint8, (), reason) from None
    stats = _STATE.stats
    stats.requested_bytes += nbytes
    if fresh:
        stats.allocated_bytes += nbytes
    stats.live_bytes += nbytes
    stats.peak_live_bytes = max(stats.peak_live_bytes, stats.live_bytes)
    return Storage(block)


def _release(storage: Storage) -> None:
    if storage.killed:
        return
    storage.killed = True
    _STATE.stats.live_bytes -= storage.nbytes
    _STATE.allocator.free(storage.data)


def _view(frame: "Frame", storage: Storage, offset: int, shape: ShapeTuple, dtype: str,
          what: str) -> np.ndarray:
    np_dtype = np.dtype(dt.to_numpy(dtype))
    reason = impossible_shape(shape, np_dtype.itemsize)
    if reason is not None:
        raise allocation_error(frame.func_name, f"tensor '{frame.binding_name}' ({what})", "", shape,
                               np_dtype, (), reason)
    nbytes = prod(shape) * np_dtype.itemsize
    if storage.killed:
        raise ShapeMismatchError(f"function '{frame.func_name}', {what}: the storage was already killed")
    if offset < 0 or offset + nbytes > storage.nbytes:
        raise ShapeMismatchError(
            f"function '{frame.func_name}', {what}: a {dtype} tensor of shape {tuple(shape)} "
            f"({nbytes} bytes) at offset {offset} does not fit in a storage of {storage.nbytes} bytes "
            "(a symbolic value beyond its declared upper bound?)")
    view = storage.data[offset:offset + nbytes].view(np_dtype).reshape(tuple(shape))
    if dt.is_float(dtype):
        view.fill(np.nan)
    _STATE.stats.tensor_allocations += 1
    return view


def _int_value(value, frame: "Frame", what: str) -> int:
    if isinstance(value, ShapeTuple):
        if len(value) != 1:
            raise ShapeMismatchError(f"function '{frame.func_name}': {what} must have one dimension")
        value = value[0]
    return int(value)


@register_builtin("relax.memory.alloc_storage")
def _alloc_storage(frame: "Frame", call: Call):
    nbytes = _int_value(frame.eval(call.args[0]), frame, "alloc_storage size")
    if nbytes < 0:
        raise ShapeMismatchError(f"function '{frame.func_name}': alloc_storage of {nbytes} bytes")
    _STATE.stats.storage_allocations += 1
    return _new_storage(nbytes, frame, f"storage '{frame.binding_name}' (R.memory.alloc_storage)")


@register_builtin("relax.memory.alloc_tensor")
def _memory_alloc_tensor(frame: "Frame", call: Call):
    storage = frame.eval(call.args[0])
    if not isinstance(storage, Storage):
        raise ShapeMismatchError(f"function '{frame.func_name}': R.memory.alloc_tensor needs a storage, "
                                 f"got {type(storage).__name__}")
    offset = int(frame.eval(call.args[1]))
    shape = frame.eval(call.args[2])
    return _view(frame, storage, offset, shape, call.attrs["dtype"], "R.memory.alloc_tensor")


@register_builtin("relax.builtin.alloc_tensor")
def _builtin_alloc_tensor(frame: "Frame", call: Call):
    shape = frame.eval(call.args[0])
    dtype = call.attrs["dtype"]
    np_dtype = np.dtype(dt.to_numpy(dtype))
    reason = impossible_shape(shape, np_dtype.itemsize)
    if reason is not None:
        raise allocation_error(frame.func_name, f"tensor '{frame.binding_name}' (R.builtin.alloc_tensor)",
                               "", shape, np_dtype, (), reason)
    storage = _new_storage(prod(shape) * np_dtype.itemsize, frame, "R.builtin.alloc_tensor")
    view = _view(frame, storage, 0, shape, dtype, "R.builtin.alloc_tensor")
    _STATE.tensor_owner[id(view)] = (view, storage)
    return view


@register_builtin("relax.memory.kill_storage")
def _kill_storage(frame: "Frame", call: Call):
    storage = frame.eval(call.args[0])
    if not isinstance(storage, Storage):
        raise ShapeMismatchError(f"function '{frame.func_name}': R.memory.kill_storage needs a storage")
    _release(storage)
    return ()


@register_builtin("relax.memory.kill_tensor")
def _kill_tensor(frame: "Frame", call: Call):
    tensor = frame.eval(call.args[0])
    owner = _STATE.tensor_owner.pop(id(tensor), None)
    if owner is not None and owner[0] is tensor:
        _release(owner[1])
    return ()


@register_builtin("relax.call_tir_dps")
def _call_tir_dps(frame: "Frame", call: Call):
    callee = call.args[0]
    func = frame.interp.mod[callee] if isinstance(callee, GlobalVar) else frame.eval(callee)
    if not isinstance(func, PrimFunc):
        raise ShapeMismatchError(f"function '{frame.func_name}': call_tir_dps needs a prim_func, "
                                 f"got {type(func).__name__}")
    args = as_value_list(frame.eval(call.args[1]))
    tir_vars = list(frame.eval(call.args[2])) if len(call.args) > 2 else []
    try:
        run_prim_func(func, args + tir_vars, frame.interp.mod)
    except ShapeMismatchError as err:   # e.g. a non-contiguous output: name the caller too (s13)
        if type(err) is not ShapeMismatchError:   # its own kind (an index out of range) as it is
            raise
        raise ShapeMismatchError(f"function '{frame.func_name}': call_tir_dps of '{func.name}': {err}") from None
    return ()


@register_builtin("relax.call_dps_library_dps")
def _call_dps_library_dps(frame: "Frame", call: Call):
    from backends.library import get_library
    name = call.args[0].global_symbol
    inputs = as_value_list(frame.eval(call.args[1]))
    outputs = as_value_list(frame.eval(call.args[2]))
    try:
        get_library(name).run_dps(inputs, outputs, f"function '{frame.func_name}'")
    except ShapeMismatchError as err:
        raise ShapeMismatchError(f"function '{frame.func_name}': {err}") from None
    return ()


__all__ = ["MemoryStats", "Storage", "FreshAllocator", "PooledAllocator", "begin_run",
           "last_run_stats", "use_allocator"]
