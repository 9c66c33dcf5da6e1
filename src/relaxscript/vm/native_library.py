"""Linking ``CallLibrary`` to a library's native C entry (``backends.library.NativeCall``).

The step fills a prebuilt array of operand pointers and calls the C function
directly, as kernels are called: no Python implementation, no per-call
argument conversion. The entry's params (e.g. a matmul's m, n, k) are
recomputed only when an operand's shape changes. Operands the VM did not
allocate (parameters, tuple fields, fallback results) are checked on every
call; one that is not a C-contiguous array of the entry's dtype takes the
NumPy implementation instead, which converts it or raises a clear error.
"""
from __future__ import annotations

import ctypes

import numpy as np

from tensorir.errors import ShapeMismatchError

from .values import data_pointer


def link_native_library(ins, nxt: int, code, frame, entry, python_step):
    """A step calling ``entry.native`` for ``ins``, or None when the native entry is unavailable."""
    native = entry.native
    address = native.address() if native is not None else None
    if address is None:
        return None
    cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(address)
    regs, ptrs = frame.regs, frame.ptrs
    operands = tuple(ins.inputs) + tuple(ins.outputs)
    pointers = (ctypes.c_void_p * len(operands))()
    allocated = tuple((i, r) for i, r in enumerate(operands) if r in code.ptr_regs)
    passed = tuple((i, r) for i, r in enumerate(operands) if r not in code.ptr_regs)
    dtype, ndarray = np.dtype(native.dtype), np.ndarray
    func_name, library = code.func.name, ins.library
    last = [None, None]   # operand shapes, their ctypes params

    def fits(value) -> bool:
        return type(value) is ndarray and value.dtype == dtype and value.flags.c_contiguous

    def new_params(shapes):
        if not all(fits(regs[r]) for r in operands):
            return None
        try:
            values = native.params(*shapes)
        except ShapeMismatchError as err:
            raise ShapeMismatchError(f"function '{func_name}': {err}") from None
        last[:] = [shapes, (ctypes.c_int64 * max(1, len(values)))(*values)]
        return last[1]

    def step():
        for i, r in passed:
            value = regs[r]
            if not fits(value):
                return python_step()
            pointers[i] = data_pointer(value)
        shapes = tuple([regs[r].shape for r in operands])
        params = last[1] if shapes == last[0] else new_params(shapes)
        if params is None:
            return python_step()
        for i, r in allocated:
            pointers[i] = ptrs[r]
        status = cfunc(pointers, params)
        if status:
            raise RuntimeError(f"function '{func_name}': library {library!r} failed (status {status})")
        return nxt
    return step
